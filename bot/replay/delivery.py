"""Delivered or not: did the rule under test reach the agent's context?

A rule that never reaches the agent cannot be followed, so a with-rule trial
whose rule was not delivered is never "the agent ignored it". The ground
truth is the gateway: it sees every request an agent sends to the model, and
``seen`` looks for the rule's text (``normalise``: whitespace, typographic
quotes and markdown aside) in what the agent put there as instructions — the
system prompt, developer messages, and the user text it sent before the model
first spoke (Codex's ``# AGENTS.md instructions`` message, Claude Code's
system reminders), less the scenario's task text — never in a tool's output
(an agent that reads a file with the rule in it was not given the rule), nor
in the model's own words, nor in the task (a scenario cannot deliver a rule
by quoting it). ``explain`` says, per agent, how the rule was handed
over and why it may not have arrived (Codex's AGENTS.md chain against
``project_doc_max_bytes``, root first; a Claude Code rule file with
``paths:``; an agent that reads no instruction file).

``deliver: files`` puts the playbook where each host reads it in a
repository (``instruction_files``), so a replay meets the host's own limits.
"""

from __future__ import annotations

import bisect
import json
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Deliver = Literal["prompt", "files"]
DELIVER = ("prompt", "files")
#: Codex joins AGENTS.md from the git root down to the working directory and cuts the total at
#: ``project_doc_max_bytes``, 32 KiB by default, silently, root first (openai/codex#7138, #13386).
CODEX_MAX_BYTES = 32 * 1024
CODEX_SOURCE = "https://github.com/openai/codex/issues/7138, https://github.com/openai/codex/issues/13386"
#: The file each agent reads its repository instructions from, at the repository root (``deliver: files``).
#: Claude Code reads a scoped rule from ``.claude/rules/`` (``paths:``); builtin, mini-swe-agent and a
#: ``command`` agent read none: under ``deliver: files`` their rule is never delivered, which is the point.
HOST_FILE = {"codex": "AGENTS.md", "opencode": "AGENTS.md", "claude-code": "CLAUDE.md"}
CLAUDE_RULE_FILE = ".claude/rules/replaybook-candidate.md"
PROMPT_CHANNEL = {
    "builtin": "the builtin agent's system prompt",
    "claude-code": "Claude Code's --append-system-prompt",
    "codex": "Codex's developer_instructions (a developer message, outside project_doc_max_bytes)",
    "opencode": "an opencode `instructions` file",
    "mini-swe-agent": "mini-swe-agent's system_template",
    "command": "the command's {playbook_file}",
}


_TYPOGRAPHY = str.maketrans({"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u00ab": '"',
                             "\u00bb": '"', "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'",
                             "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-"})
_MARKUP = re.compile(r"[*_`~#>|\\]")  # emphasis, code, headings, quotes, tables, escapes: how a host renders it


def normalise(text: str) -> str:
    """``text`` as it reads whatever a host's renderer or template did to it: NFKC, typographic quotes and
    dashes as ASCII, markdown's marks gone, every run of whitespace one space (a rule wrapped, re-indented,
    in bold, in a list item or in code is still the rule). The rule and the request are read alike."""
    text = unicodedata.normalize("NFKC", text).translate(_TYPOGRAPHY)
    return " ".join(_MARKUP.sub("", text).split())


_LOADED_RULE = re.compile(r"\n<system-reminder>\nContents of /[^\n]*/" + re.escape(CLAUDE_RULE_FILE)
                          + r":\n\n(.*?)\n</system-reminder>", re.DOTALL)


def loaded_rules(content: Any) -> list[str]:
    """The harness's scoped rule file as Claude Code appends it to a tool's result once a matching file was opened
    (2.1.328: ``<system-reminder>`` ``Contents of …/.claude/rules/replaybook-candidate.md:``). Only that file's
    header counts: any other text in a tool's output is the tool's, not instructions."""
    if isinstance(content, list):
        content = "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return _LOADED_RULE.findall(content) if isinstance(content, str) else []


def _texts(content: Any, *, skip_tool_output: bool = True) -> list[str]:
    """The text of a message's content (a string or blocks), tool results and outputs left out (but for the
    scoped rule file Claude Code appends to one, ``loaded_rules``)."""
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result":
                out += loaded_rules(block.get("content"))
            if skip_tool_output and block.get("type") in ("tool_result", "function_call_output",
                                                          "custom_tool_call_output"):
                continue
            if isinstance(block.get("text"), str):
                out.append(block["text"])
    return out


_INSTRUCTING = ("system", "developer")
#: How the harness hands builtin a path-scoped rule once its trigger fired (``agents.scoped_delivery.reminder``):
#: a text block of its own, beside the tool results of the turn that fired it. Only a block that begins so counts
#: after the model spoke; a tool's output never does (it is a ``tool_result``, or a string observation).
SCOPED_REMINDER = "<system-reminder>\nA rule for the files you just opened:\n\n"


_LOADED_BLOCK = re.compile(r"<system-reminder>\nContents of /[^\n]*/" + re.escape(CLAUDE_RULE_FILE)
                           + r":\n\n(.*?)\n</system-reminder>", re.DOTALL)


def _reminders(content: Any) -> list[str]:
    """The scoped rule's own blocks in a user turn after the model spoke: the harness's (``SCOPED_REMINDER``, for
    builtin), and Claude Code's loaded rule file, which 2.1.x sends either at the end of the tool's result that
    fired it (``loaded_rules``) or as a text block of its own beside it. Only a block that *begins* so counts."""
    if not isinstance(content, list):
        return []
    out: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_result":
            out += loaded_rules(block.get("content"))
        elif block.get("type") == "text" and isinstance(text := block.get("text"), str):
            if text.startswith(SCOPED_REMINDER):
                out.append(text)
            elif found := _LOADED_BLOCK.match(text):
                out.append(found.group(1))
    return out


def context_text(request: dict[str, Any]) -> tuple[str, list[str]]:
    """What the agent sent the model as its instructions, in a Messages, Responses or Chat Completions request,
    ``normalise``d: the system prompt (``system``, ``instructions``) with its system and developer messages, and
    apart, each user text it sent before the model first spoke (Claude Code's system reminders with CLAUDE.md,
    Codex's ``# AGENTS.md instructions`` message, the task). Never the model's own words (an assistant turn, a
    function call) nor anything after them in a user turn (a tool's output, mini-swe-agent's observations), nor a
    tool's result or a ``tool`` message; but for the harness's own scoped-rule block (``SCOPED_REMINDER``), which
    builtin adds beside a tool's result once the rule's trigger fired, and Claude Code's loaded rule file at the
    end of one (``loaded_rules``)."""
    system = _texts(request.get("system")) + _texts(request.get("instructions"))
    users: list[str] = []
    items = request.get("messages") if isinstance(request.get("messages"), list) else \
        request.get("input") if isinstance(request.get("input"), list) else []
    spoke = False
    for item in items:
        if not isinstance(item, dict):
            continue
        role, kind = item.get("role"), item.get("type", "message")
        if kind != "message" or role == "assistant":
            spoke = True
        elif role in _INSTRUCTING:
            system += _texts(item.get("content"))
        elif role == "user" and not spoke:
            users += _texts(item.get("content"))
        elif role == "user":
            system += _reminders(item.get("content"))
    if isinstance(request.get("input"), str):
        users.append(request["input"])
    return normalise("\n".join(system)), [normalise(u) for u in users]


def seen(request: dict[str, Any], needle: str, task: str = "") -> bool:
    """Whether ``needle`` (already ``normalise``d) is in what the agent sent as its instructions
    (``context_text``): anywhere in its system prompt, or in a user text outside every copy of ``task`` (the
    scenario's own text, which its author writes: quoting the rule there delivers nothing)."""
    if not needle:
        return False
    system, users = context_text(request)
    if needle in system:
        return True
    told = normalise(task)
    return any(_outside(needle, text, told) for text in users)


def _outside(needle: str, text: str, told: str) -> bool:
    """Whether ``needle`` occurs in ``text`` other than inside a copy of ``told``. The copies all have one length,
    so of those starting at or before an occurrence the last one reaches furthest: one bisection each."""
    starts = _find_all(text, told) if told else []
    for at in _find_all(text, needle):
        i = bisect.bisect_right(starts, at) - 1
        if i < 0 or starts[i] + len(told) < at + len(needle):
            return True
    return False


def _find_all(text: str, part: str) -> list[int]:
    out, at = [], text.find(part)
    while at >= 0:
        out.append(at)
        at = text.find(part, at + 1)
    return out


@dataclass
class Delivery:
    """Whether the rule reached the agent: True, False, or None (no rule under test, or no request at all)."""

    delivered: bool | None
    how: str  # the channel it was handed over by
    reason: str = ""  # why it did not arrive, when it did not
    requests: int = 0  # requests the gateway saw
    first: int | None = None  # the first request (1-based) that held it
    held: int = 0  # requests that held it: fewer than ``requests`` when some (a sub-agent's, say) went without
    loaded: list[dict[str, str]] | None = None  # what the agent says it loaded (Claude Code's InstructionsLoaded)
    # a path-scoped rule: its trigger, what fired it and the request it was first put in (agents.scoped_delivery)
    trigger: dict[str, Any] | None = None
    error: str = ""  # a delivery error: a scoped rule seen where its trigger did not fire; the trial is unscored
    withheld: bool = False  # not delivered because its trigger never fired: the host's own trial, scored

    def to_dict(self) -> dict[str, Any]:
        return {"delivered": self.delivered, "how": self.how, "reason": self.reason, "requests": self.requests,
                "first_request": self.first, "requests_with_rule": self.held,
                **({"loaded": self.loaded} if self.loaded is not None else {}),
                **({"trigger": self.trigger} if self.trigger is not None else {}),
                **({"error": self.error} if self.error else {}), **({"withheld": True} if self.withheld else {})}


def judge(agent: str, rule: str, sightings: list[bool], *, deliver: str, root: Path | None,  # root: the fixture
          files: dict[str, str], command: str | None = None, loaded: list[dict[str, str]] | None = None) -> Delivery:
    """The delivery of ``rule`` from the gateway's ``sightings`` (one per request), explained for ``agent``
    (with ``loaded``, the instruction files the agent itself says it loaded)."""
    how = channel(agent, deliver, files)
    if not rule.strip():
        return Delivery(None, how)
    first = next((i + 1 for i, hit in enumerate(sightings) if hit), None)
    if first is not None:
        return Delivery(True, how, requests=len(sightings), first=first, held=sum(sightings), loaded=loaded)
    if not sightings:
        return Delivery(None, how, "the agent sent no request to the model", requests=0, loaded=loaded)
    why = explain(agent, rule, deliver=deliver, root=root, files=files, command=command)
    if loaded is not None and files:
        names = sorted({f"{e['file']} ({e['how']})" for e in loaded})
        missing = sorted(set(files) - {e["file"] for e in loaded})
        why += (f"; Claude Code's InstructionsLoaded hook named {', '.join(names) or 'no file'}"
                + (f", never {', '.join(missing)}" if missing else ""))
    return Delivery(False, how, why, requests=len(sightings), loaded=loaded)


def channel(agent: str, deliver: str, files: dict[str, str]) -> str:
    if deliver == "files":
        return ("the repository's " + ", ".join(sorted(files))) if files else "no file (the agent reads none)"
    return PROMPT_CHANNEL.get(agent, "the system prompt")


def explain(agent: str, rule: str, *, deliver: str, root: Path | None, files: dict[str, str],
            command: str | None = None) -> str:
    """Why the rule may not have reached ``agent``: the known cause when there is one, else the plain fact."""
    if deliver == "files" and not files:
        return f"{agent} reads no instruction file from the repository (AGENTS.md, CLAUDE.md), so a rule rendered there never reaches it"
    if agent == "command" and command is not None and "{playbook_file}" not in command:
        return "the --command template has no {playbook_file}, so the agent is never given the playbook"
    if agent == "codex" and deliver == "files" and root is not None:
        if (root / "AGENTS.override.md").is_file() and "AGENTS.md" in files:
            return "the repository has an AGENTS.override.md, which Codex reads instead of the AGENTS.md holding the rule"
        cut = codex_cut(root, rule, files=files)
        if cut:
            return cut
    if agent == "claude-code" and CLAUDE_RULE_FILE in files:
        head = files[CLAUDE_RULE_FILE].split("---", 2)[1].strip() if files[CLAUDE_RULE_FILE].startswith("---") else ""
        return (f"the rule is in {CLAUDE_RULE_FILE} with `{' '.join(head.split())}`: Claude Code loads such a rule "
                "only when it reads a matching file (and may not load it at all: anthropics/claude-code#87217); "
                "no request to the model held it")
    return f"no request to the model held the rule's text (handed over by {channel(agent, deliver, files)})"


def codex_chain(root: Path, cwd: Path | None = None, files: dict[str, str] | None = None) -> list[tuple[str, bytes]]:
    """The AGENTS.md files Codex reads, root first: from the git root (``root``) down to ``cwd``
    (``AGENTS.override.md`` before ``AGENTS.md`` in each folder), with ``files`` (what the harness wrote) over
    what is on disk. ``root`` is the fixture, never the tree an agent left: no link is followed."""
    cwd, files = cwd or root, files or {}
    parts = cwd.relative_to(root).parts
    out = []
    for folder in [root, *[root.joinpath(*parts[:i + 1]) for i in range(len(parts))]]:
        for name in ("AGENTS.override.md", "AGENTS.md"):
            rel = (folder / name).relative_to(root).as_posix()
            if rel in files:
                out.append((rel, files[rel].encode()))
                break
            if (folder / name).is_file() and not (folder / name).is_symlink():
                out.append((rel, (folder / name).read_bytes()))
                break
    return out


def codex_cut(root: Path, rule: str, budget: int = CODEX_MAX_BYTES, files: dict[str, str] | None = None) -> str:
    """Why Codex cut the rule, when its chain passes ``budget``; empty when the chain fits."""
    chain = codex_chain(root, files=files)
    joined = b"\n\n".join(data for _, data in chain)
    if len(joined) <= budget:
        return ""
    at = joined.find(rule.strip().encode()) if rule.strip() else -1
    names = " + ".join(f"{rel} ({len(data):,} bytes)" for rel, data in chain)
    where = f", and the rule at byte {at:,} was cut" if at >= 0 and at + len(rule.strip().encode()) > budget else ""
    return (f"Codex's AGENTS.md chain is {len(joined):,} bytes ({names}), over its project_doc_max_bytes of "
            f"{budget:,} bytes ({CODEX_SOURCE}): Codex cuts the total silently, root first{where}")


def instruction_files(agent: str, playbook: str, fixture: Path, *, rule: str = "",
                      paths: tuple[str, ...] = ()) -> dict[str, str]:
    """``deliver: files``: the files (relative path -> text) that put ``playbook`` where ``agent``'s host
    reads it in a repository, each after the fixture's own text of that file. With ``paths`` (the rule's
    scope), Claude Code gets the rule in its own ``.claude/rules/`` file with ``paths:``, and Codex in each
    folder's ``AGENTS.md`` (``bot.playbook.scope.folders``; a glob with no folder keeps it in the root file), as
    rendered."""
    name = HOST_FILE.get(agent)
    if name is None or not playbook.strip():
        return {}
    body = playbook
    out: dict[str, str] = {}
    if agent == "claude-code" and paths and rule.strip() and rule.strip() in playbook:
        body = playbook.replace(rule.strip(), "").strip()
        scope = "paths:\n" + "".join(f"  - {json.dumps(g)}\n" for g in paths)
        out[CLAUDE_RULE_FILE] = f"---\n{scope}---\n\n{rule.strip()}\n"
    if agent == "codex" and paths and rule.strip() and rule.strip() in playbook:
        from bot.replay.host_scope import folders  # Codex reads a folder's AGENTS.md: one per folder, as rendered

        for folder in folders(list(paths)) or []:
            body = playbook.replace(rule.strip(), "").strip()
            out[f"{folder}/{name}"] = _after_own(fixture, f"{folder}/{name}", rule.strip())
    if body.strip():
        out[name] = _after_own(fixture, name, body)
    return out


def _after_own(fixture: Path, rel: str, body: str) -> str:
    """``body`` after the fixture's own text of ``rel`` (none when it is missing or a link)."""
    own = fixture / rel
    mine = own.read_text(encoding="utf-8", errors="replace") if own.is_file() and not own.is_symlink() else ""
    return (mine.rstrip("\n") + "\n\n" if mine.strip() else "") + body.rstrip("\n") + "\n"


def write(root: Path, files: dict[str, str]) -> None:
    """Write ``files`` into the sandbox's tree (before its baseline commit: they are the fixture as the agent
    gets it, in no diff). Their paths are the harness's own, never a scenario's."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            path.unlink()
        path.write_text(text, encoding="utf-8")
