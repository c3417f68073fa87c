"""Making untrusted text safe to copy into what the bot writes on GitHub.

Logs, issue and PR bodies, reviews, rule texts and model answers are data.
Before the bot copies any of them into an issue, a comment, a PR, a commit
message or a job summary, :func:`neutralise` defuses everything in them that
GitHub (or the bot itself) would act on:

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


__all__ = ["ZWSP", "neutralise"]
