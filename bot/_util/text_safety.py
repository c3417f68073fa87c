"""Untrusted text made safe: one home for fencing, one-lining and neutralising it.

Logs, issue and PR bodies, reviews, rule texts and model answers are data. They reach what
the bot writes (GitHub, prompts, files) only through the helpers here:

- :func:`clean`: one log line as plain text (any bytes decode; timestamps, colours and
  control bytes go).
- :func:`one_line`: whitespace collapsed to one line, colours and control bytes gone, cut to
  a length with "…".
- :func:`fence` (prompt data: a labelled block the text cannot close, so it cannot speak as
  the prompt), :func:`block` (a markdown block the text cannot close), :func:`fenced` (the
  same, neutralised, for GitHub) and :func:`code` (one inline code span, neutralised).
- :func:`shown`: untrusted data quoted in an error message: a bounded, neutralised excerpt of a
  string, only the kind and size of a list or mapping (never its ``repr``, which walks all of it).
- :func:`neutralise`: before the bot copies untrusted text into an issue, a comment, a PR, a
  commit message or a job summary, it defuses everything GitHub (or the bot itself) would
  act on:

  - no ``<!--`` survives, so no hidden marker (``<!-- replaybook:KEY -->``) and
    no hidden HTML comment can be planted in the bot's text;
  - no run of three or more backticks or tildes survives, so the text can
    neither close the fence it sits in nor open one of its own;
  - ``@name`` mentions, ``#N`` and ``GH-N`` references (and so the closing
    keywords ``Closes #N``), markdown links and images, and HTML tags are
    broken by an invisible character, so nothing pings, closes, links or
    loads.

  The text stays readable: a zero-width space (U+200B) is inserted, nothing is
  removed. Applying it twice changes nothing more.
"""

from __future__ import annotations

import re

ZWSP = "\u200b"

_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"<!--"), f"<!{ZWSP}--"),
    (re.compile(r"(?<=<)(?=[A-Za-z/!?])"), ZWSP),  # <img …>, </details>, <!doctype>, <http://…>
    (re.compile(r"([`~])(?=\1\1)"), rf"\1{ZWSP}"),  # ``` and ~~~: every third mark is split off
    (re.compile(r"(?<=@)(?=[A-Za-z0-9_-])"), ZWSP),  # @user, @org/team
    (re.compile(r"(?<=#)(?=\d)"), ZWSP),  # #77, owner/repo#77, Closes #77
    (re.compile(r"(?i)(?<=\bgh)(?=-\d)"), ZWSP),  # GH-77
    (re.compile(r"(?<=!)(?=\[)"), ZWSP),  # ![image](…)
    (re.compile(r"(?<=\])(?=[(\[:])"), ZWSP),  # [text](url), [text][ref], [ref]: url
)


def neutralise(text: str | None) -> str:
    """``text`` with every marker, fence, mention, reference, link, image and tag defused (see the module)."""
    out = text or ""
    for pattern, replacement in _RULES:
        out = pattern.sub(replacement, out)
    return out




# -- one line ---------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
_STAMP = re.compile(r"^\ufeff?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ?")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clean(raw: bytes | str) -> str:
    """One log line as safe text: any bytes decode, timestamps, colours and control bytes go."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    text = _ANSI.sub("", text.rstrip("\r\n"))
    # Trailing blanks go too: they are invisible, and they keep YAML from writing the excerpt as a block.
    return _CONTROL.sub("\ufffd", _STAMP.sub("", text, count=1)).expandtabs(4).rstrip()


def one_line(text: object, limit: int | None = None) -> str:
    """``text`` on one line: whitespace collapsed, colours and control bytes gone, cut to ``limit`` with "…"."""
    line = " ".join(_CONTROL.sub("\ufffd", _ANSI.sub("", " ".join(str(text or "").split()))).split())
    return line if limit is None or len(line) <= limit else line[: limit - 1].rstrip() + "…"


def shown(value: object, limit: int = 60) -> str:
    """``value`` as an error message may quote it: a string cut to ``limit``, one line, neutralised and with
    unprintable characters escaped; a number or flag as written; a list or mapping by its kind and size only.

    Never ``repr``: a YAML document's aliases make a small file a huge structure, and ``repr`` walks all of it.
    """
    if value is None or isinstance(value, (bool, float)):
        return repr(value)
    if isinstance(value, int):
        return str(value) if value.bit_length() < 200 else "a very large number"
    if isinstance(value, str):
        text = one_line(value, limit)
        text = "".join(ch if ch.isprintable() else f"\\u{ord(ch):04x}" for ch in text)
        return "'" + neutralise(text) + "'"
    if isinstance(value, dict):
        return f"a mapping of {len(value)} key(s)"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)} item(s)"
    return f"a {type(value).__name__}"


# -- fences -----------------------------------------------------------------------------------


def _ticks(text: str, least: int) -> str:
    """A run of backticks longer than any in ``text`` (and at least ``least``)."""
    return "`" * max(least, max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)


def block(text: str, info: str = "text") -> str:
    """``text`` as a markdown block it cannot close (not neutralised: for files and prompts)."""
    ticks = _ticks(text, 3)
    return f"{ticks}{info}\n{text}\n{ticks}"


def fence(text: str, label: str = "data") -> str:
    """Untrusted text (logs, PR bodies) as inert data inside a prompt.

    The fence is longer than any run of backticks in the text, so the text
    cannot close it and speak as the prompt.
    """
    return f"<{label}>\n{block(text)}\n</{label}>"


def fenced(text: str, info: str = "text") -> str:
    """``text``, neutralised, in a fence it cannot close (for GitHub)."""
    return block(neutralise(text).rstrip(), info)


def code(text: str, limit: int = 300) -> str:
    """``text`` as one inline code span: nothing in it renders, pings or links."""
    line = neutralise(one_line(text, limit))
    ticks = _ticks(line, 1)
    return f"{ticks} {line} {ticks}"


__all__ = ["ZWSP", "block", "clean", "code", "fence", "fenced", "neutralise", "one_line", "shown"]
