"""Comment commands: what ``/replaybook …`` lines a comment body holds. Pure: no network, no PyGithub.

Four commands, each on a line of its own::

    /replaybook replay [--agent A] [--trials N]
    /replaybook explain
    /replaybook retire rule-NNNN [reason...]
    /replaybook retest

Only what GitHub renders as a command counts: a line that *starts* with
``/replaybook`` (after at most three spaces), never one in the middle of a
sentence, and never one GitHub hides or shows as someone else's words:

- inside an HTML comment: a ``<!--`` anywhere on a line, even mid-line, hides
  the rest of that line and every line until the one holding ``-->`` (that
  line too);
- inside a ``>`` quote, including its lazy continuation: an unquoted line
  right after a quoted one belongs to the quote until a blank line;
- inside a fenced (```` ``` ```` or ``~~~``) block or an indented code block.

Lines end where markdown ends them (``\n``, ``\r\n``, ``\r``), not at the
other breaks ``str.splitlines`` knows. So quoting someone's command, hiding one
in a comment, or showing one in a code block, runs nothing.

A line that is a command with bad arguments is a :class:`BadCommand`, whose
``problem`` the bot's reply explains; nothing here raises. Every argument is
data: a reason is kept as written (the writer neutralises it), and an agent
name must be a plain word, so no path, shell word or ``${{ }}`` gets through.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from bot.playbook import rule_ids

PREFIX = "/replaybook"
NAMES = ("replay", "explain", "retire", "retest")
REASON_LIMIT = 500  # characters of a retirement reason kept
LINE_LIMIT = 2_000  # characters of a bad line quoted back

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_QUOTE = re.compile(r"^ {0,3}>")
_LINE_END = re.compile(r"\r\n|\r|\n")  # markdown's line ends only (str.splitlines also breaks at \x1c, \u2028, …)
_COMMAND = re.compile(r"^ {0,3}/replaybook(?=\s|$)(.*)$")
_AGENT = re.compile(r"^[a-z][a-z0-9-]{0,39}$")

CommandName = Literal["replay", "explain", "retire", "retest"]


@dataclass(frozen=True)
class Command:
    """One well-formed command; ``agent``/``trials`` only for replay, ``rule``/``reason`` only for retire."""

    name: CommandName
    agent: str | None = None
    trials: int | None = None
    rule: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class BadCommand:
    """A ``/replaybook`` line that is no command the bot knows, or whose arguments are wrong: ``problem`` says how."""

    line: str
    problem: str


Parsed = Command | BadCommand

USAGE = ("`/replaybook replay [--agent A] [--trials N]`, `/replaybook explain`, "
         "`/replaybook retire rule-NNNN [reason]` or `/replaybook retest`")


def parse(body: str | None) -> list[Parsed]:
    """Every command line of ``body``, in order (see the module for which lines count)."""
    return [_command(line, rest) for line, rest in _command_lines(body or "")]


def _command_lines(body: str):
    fence: tuple[str, int] | None = None  # the open fence's mark and length
    hidden = False  # inside an HTML comment: a command nobody sees never runs
    quoted = False  # inside a blockquote's paragraph: an unquoted line right after it continues it (lazily)
    for line in _LINE_END.split(body):
        if hidden:
            hidden = "-->" not in line  # the line that closes it is hidden whole (conservative: never a command)
            continue
        opening = _FENCE.match(line)
        if fence is not None:
            mark, length = fence
            if opening and opening.group(1)[0] == mark and len(opening.group(1)) >= length and not opening.group(2).strip():
                fence = None
            continue
        if "<!--" in line:  # anywhere on the line, even mid-line or in a code span: what follows is not shown
            line, rest = line.split("<!--", 1)
            hidden = "-->" not in rest
        if not line.strip():
            quoted = False  # a blank line ends the quote
            continue
        if opening and not (opening.group(1)[0] == "`" and "`" in opening.group(2)):
            fence, quoted = (opening.group(1)[0], len(opening.group(1))), False
            continue
        if _QUOTE.match(line) or quoted:
            quoted = True
            continue
        found = _COMMAND.match(line)  # at most three spaces: a tab or four spaces is an indented code block
        if found:
            yield line[:LINE_LIMIT], found.group(1)[:LINE_LIMIT + REASON_LIMIT]


def _command(line: str, rest: str) -> Parsed:
    words = rest.split()
    if not words:
        return BadCommand(line, f"no command after `{PREFIX}`; use {USAGE}")
    name, args = words[0], words[1:]
    if name not in NAMES:
        return BadCommand(line, f"`{name[:80]}` is not a command; use {USAGE}")
    if name == "replay":
        return _replay(line, args)
    if name == "retire":
        return _retire(line, rest.split(None, 2)[1:])
    if args:
        return BadCommand(line, f"`{name}` takes no arguments, got `{' '.join(args)[:80]}`")
    return Command(name)  # type: ignore[arg-type]


def _replay(line: str, args: list[str]) -> Parsed:
    agent: str | None = None
    trials: int | None = None
    queue = []
    for arg in args:  # --name=value reads as --name value
        queue += arg.split("=", 1) if arg.startswith("--") and "=" in arg else [arg]
    while queue:
        option = queue.pop(0)
        if option not in ("--agent", "--trials"):
            return BadCommand(line, f"`replay` takes `--agent A` and `--trials N`, not `{option[:80]}`")
        if not queue:
            return BadCommand(line, f"`{option}` needs a value")
        value = queue.pop(0)
        if option == "--agent":
            if not _AGENT.match(value):
                return BadCommand(line, f"`--agent` must name an agent (a word such as `claude-code`), "
                                        f"not `{value[:80]}`")
            agent = value
        else:
            if not value.isdigit() or not 1 <= int(value[:6]) <= 999:
                return BadCommand(line, f"`--trials` must be a whole number from 1, not `{value[:80]}`")
            trials = int(value)
    return Command("replay", agent=agent, trials=trials)


def _retire(line: str, args: list[str]) -> Parsed:
    if not args or not rule_ids.is_rule_id(args[0]):
        got = f", not `{args[0][:80]}`" if args else ""
        return BadCommand(line, f"`retire` needs the rule's id, `rule-NNNN`{got}")
    reason = " ".join(args[1].split())[:REASON_LIMIT] if len(args) > 1 else ""
    return Command("retire", rule=args[0], reason=reason)
