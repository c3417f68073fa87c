"""Is a belief delta grounded in its evidence? A model's ``believed`` and ``actual``, read together, must name
something the evidence shows, and neither may restate an example of the capture prompt.

Defined precisely (docs/capture-distill.md, "Grounded"):

* **Normalised**: NFKC, case-folded, backslashes as ``/``, quotes and backticks as spaces.
* **A token** is a run of letters, digits and ``_ . / : @ + -``, its leading and trailing punctuation dropped;
  a token holding ``/`` also gives its parts (``packages/worker/pytest.ini`` gives ``packages``, ``worker`` and
  ``pytest.ini``).
* **An anchor** is a token of at least :data:`MIN_ANCHOR` (4) characters that is *specific*: it holds a digit or
  one of ``_ . / : @ + -``, or it is a word outside :data:`GENERIC` (English function words and the words every
  CI log says: error, failed, test, process …). A 3-digit status (``503``) is an anchor too.
* **Grounded**: ``believed`` and ``actual``, read together, name at least one anchor that occurs in the
  evidence (trigger, failing step, excerpt, known task) as a whole token: not inside a longer word (``test``
  is not found in ``pytest``), though a path
  may continue (``packages/api`` is found in ``packages/api/tests/test_x.py``).
* **Copied**: a line's normalised text equals an example of the prompt (every ``"…"`` span of at least
  :data:`MIN_EXAMPLE` characters in ``bot/model/prompts/capture.j2``), or the two share at least 3 words of 3+
  characters and those are at least 60% of the shorter one's words.

The check is deterministic and needs no model; capture stores a refused answer as ``triage: true`` with the
reason it returns.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from importlib import resources

MIN_ANCHOR = 4
MIN_EXAMPLE = 12
COPY_SHARE = 0.6
COPY_WORDS = 3

_TOKEN = re.compile(r"[\w./:@+-]+")
_EDGE = ".:/@+-"
_SPECIFIC = re.compile(r"[\d_./:@+-]")
_STATUS = re.compile(r"^\d{3}$")
_QUOTED = re.compile(r'"([^"\n]{%d,})"' % MIN_EXAMPLE)

# Words that name nothing in particular: English function words, and what every CI log and every belief says.
GENERIC = frozenset("""
about above after again against also although always another anything around because been before being below
between both but cannot could does doing done down during each either else enough even ever every first from
further given have having here however into itself just last later least less like made make makes many might
more most much must need needed needs never next none nothing often once only other others ours over own same
should since some something still such than that their them then there these they thing things this those though
through thus together too under until upon very want wanted were what whatever when where whether which while
who whole whose why will with within without would your yours
actual actually agent agents assume assumed assumes assumption believe believed believes belief wrong right
true false fact instead really real truly used using uses work works worked working correct correctly
error errors fail fails failed failing failure failures fatal exception exit exited code codes process
completed complete finish finished test tests tested testing pass passed passes passing run runs ran running
step steps job jobs line lines file files folder folders directory directories command commands output
result results check checks checked found missing exist exists existed return returned value values
repo repository repositories project projects change changes changed changing log logs build builds built
time times warning warnings info debug trace note notes message messages issue issues problem problems
date dates dated version versions update updates updated latest current newer older expected expect unexpected
required require requires properly proper given
""".split())


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text or "").casefold().replace("\\", "/")
    return re.sub(r"[`'\"‘’“”«»]", " ", text)


def tokens(text: str) -> list[str]:
    out = []
    for raw in _TOKEN.findall(normalise(text)):
        token = raw.strip(_EDGE)
        if token:
            out.append(token)
            if "/" in token:
                out += [p.strip(_EDGE) for p in token.split("/") if p.strip(_EDGE)]
    return out


def is_anchor(token: str) -> bool:
    """A specific name: a 3-digit status, or 4+ characters, not all digits, holding a digit or ``_ . / : @ + -``
    or else a word outside :data:`GENERIC`."""
    if _STATUS.match(token):
        return True
    if len(token) < MIN_ANCHOR or token.isdigit():
        return False
    return bool(_SPECIFIC.search(token)) or token not in GENERIC


def anchors(line: str) -> list[str]:
    """The specific names in ``line``, in order, once each."""
    return list(dict.fromkeys(t for t in tokens(line) if is_anchor(t)))


def _occurs(anchor: str, evidence: str) -> bool:
    return re.search(r"(?<![\w])" + re.escape(anchor) + r"(?![\w])", evidence) is not None


def grounding(line: str, evidence: str) -> list[str]:
    """The anchors of ``line`` that occur in ``evidence`` (empty: the line names nothing the evidence shows)."""
    text = normalise(evidence)
    return [a for a in anchors(line) if _occurs(a, text)]


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[\w./-]+", normalise(text)) if len(w.strip(_EDGE)) >= 3}


def copies(line: str, example: str) -> bool:
    """Whether ``line`` restates ``example`` (see the module's docstring)."""
    a, e = _words(line), _words(example)
    if " ".join(normalise(line).split()) == " ".join(normalise(example).split()):
        return True
    shared = a & e
    return len(shared) >= COPY_WORDS and len(shared) >= COPY_SHARE * min(len(a), len(e))


@lru_cache(maxsize=None)
def prompt_examples(template: str = "capture") -> tuple[str, ...]:
    """Every ``"…"`` span of the prompt template (its examples and placeholders), read from the package."""
    text = (resources.files("bot.model") / "prompts" / f"{template}.j2").read_text(encoding="utf-8")
    return tuple(dict.fromkeys(m.group(1).strip() for m in _QUOTED.finditer(text)))


def refusal(believed: str, actual: str, evidence: str, examples: tuple[str, ...] | None = None) -> str | None:
    """Why a belief delta cannot be kept (it restates a prompt example, or names nothing in the evidence), or None."""
    examples = prompt_examples() if examples is None else examples
    for field, line in (("believed", believed), ("actual", actual)):
        copied = next((e for e in examples if copies(line, e)), None)
        if copied is not None:
            return (f"the model's `{field}` restates the capture prompt's example {copied[:80]!r} (our own "
                    "text) instead of stating this failure")
    if not grounding(f"{believed}\n{actual}", evidence):
        # The model's words are not quoted: a hostile log can steer them, and the reason may be posted.
        return ("the model's belief delta names no path, command or error the evidence shows (no specific word "
                f"of {MIN_ANCHOR}+ characters of its `believed` or `actual` occurs in the log)")
    return None

__all__ = ["GENERIC", "MIN_ANCHOR", "anchors", "copies", "grounding", "is_anchor", "normalise", "prompt_examples",
           "refusal", "tokens"]
