"""Credentials: which names carry them, and redacting their values.

A replay never hands a credential to the agent (``env_allow`` refuses the
names), and as a second line of defence every value the harness knows to be
secret is replaced by ``***`` in everything a run writes and prints.
"""

from __future__ import annotations

import json
import re
from typing import Iterable, Mapping

REDACTED = "***"
_CREDENTIAL = re.compile(r"(^|_)(TOKEN|KEY|SECRET|PASSWORD|PASSWD|PASS|CREDENTIALS?|AUTH|COOKIE|SESSION)(_|$)")
_MIN_SECRET = 8  # shorter values ("1", "true") would redact ordinary text


def is_credential_name(name: str) -> bool:
    """True for names that carry credentials: ``ANTHROPIC_API_KEY``, ``GITHUB_TOKEN``, ``*_SECRET``…"""
    return bool(_CREDENTIAL.search(name.upper()))


def credential_error(name: str, where: str) -> str:
    return (f"{where}: `{name}` names a credential, and a replay never hands one to the agent; "
            "remove it (the model is reached through the gateway, which holds the key), or give the "
            "scenario a fake value in `env:`")


class Redactor:
    """Replaces each known secret value, and its JSON-escaped form, by ``***``."""

    def __init__(self, values: Iterable[str]):
        forms: set[str] = set()
        for v in values:
            if v and len(v) >= _MIN_SECRET:
                forms.add(v)
                forms.add(json.dumps(v)[1:-1])
        ordered = sorted(forms, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        self._bytes = [f.encode("utf-8", "surrogateescape") for f in ordered]

    def __bool__(self) -> bool:
        return self._pattern is not None

    def text(self, value: str) -> str:
        return self._pattern.sub(REDACTED, value) if self._pattern and value else value

    def data(self, value: bytes) -> bytes:
        for form in self._bytes:
            if form in value:
                value = value.replace(form, REDACTED.encode())
        return value


def known_secrets(environ: Mapping[str, str], names: Iterable[str] = ()) -> list[str]:
    """The values of the credential-named variables in ``environ``, and of ``names``."""
    wanted = set(names)
    return [v for k, v in environ.items() if is_credential_name(k) or k in wanted]


def host_redactor(environ: Mapping[str, str] | None = None) -> Redactor:
    """Every secret this process holds: credential-named variables and the replay cache's signing key.

    Applied where text leaves the machine (the CLI's errors, reports, GitHub
    writes, job summaries), whatever produced the text.
    """
    from pathlib import Path

    from bot import settings

    environ = settings.environ() if environ is None else environ
    values = known_secrets(environ)
    key_file = Path(environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "replaybook" / "cache.key"
    try:
        values.append(key_file.read_text(encoding="utf-8", errors="replace").strip())
    except OSError:
        pass
    return Redactor(values)


def redact_data(value, redactor: Redactor):
    """``value`` (JSON-like: dicts, lists, strings) with every string redacted."""
    if isinstance(value, str):
        return redactor.text(value)
    if isinstance(value, dict):
        return {k: redact_data(v, redactor) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_data(v, redactor) for v in value)
    return value
