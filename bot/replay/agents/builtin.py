"""``builtin``: our own tool-use loop over the Messages API (``messages.create``, no SDK).

Tools: ``bash``, ``read``, ``write`` and ``edit``, all confined to the
sandbox: the file tools run inside it too, in its executor (``bot.replay.sandbox.executor``). The loop runs in-process (no interpreter start-up per replay); each
``bash`` call is a real process in the sandbox, traced by the kernel,
under the run's remaining time.

Each turn is one tool call or an explicit ``finish``: the request says ``tool_choice: {"type": "any"}`` (the local
model's server holds it by a grammar; a hosted model honours it), and an answer with no call at all (a model that
does not honour it) still ends the run, as it always did. Two guards keep a small model's turns useful: the same
call failing a second time gets a tool result that says so plainly (:class:`RepeatGuard`), and an answer cut at
``ANSWER_TOKENS`` (a runaway, sized well above a tool call) is named back to the model instead of ending the run.
The scenario's ``budget.max_turns`` bounds the loop.
"""

from __future__ import annotations

import json
from typing import Any

from bot.replay.agents import AgentResult, AgentRun, messages
from bot.replay.sandbox.executor import FileToolError
from bot.replay.trace.shims import TOOL_ENV

VERSION = "builtin-2"
MAX_TOOL_OUTPUT = 20_000
ANSWER_TOKENS = 1024  # one tool call, a file's worth of `write` included; a longer answer is a runaway
SYSTEM = (
    "You are a coding agent working in a git repository. The repository root is your working "
    "directory; use the tools to inspect and change it. Look at the files that matter (ls, grep, read) before you "
    "change anything. Every answer is one tool call. When the task is done, call `finish` with a short summary."
)
TOOLS = [
    {"name": "bash", "description": "Run a bash command in the repository root; returns exit code and output.",
     "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
    {"name": "read", "description": "Read a file (path relative to the repository root).",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "write", "description": "Create or overwrite a file with the given content.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                      "required": ["path", "content"]}},
    {"name": "edit", "description": "Replace the one occurrence of `old` with `new` in a file.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "old": {"type": "string"},
                                                       "new": {"type": "string"}},
                      "required": ["path", "old", "new"]}},
    {"name": "finish", "description": "End the task: call this once the work is done, with a one-line summary.",
     "input_schema": {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}},
]
RUNAWAY = (f"Your answer was cut off at {ANSWER_TOKENS} tokens before it became a tool call. Answer with one short "
           "tool call (use `edit` for a small change rather than writing a whole file), or call `finish`.")


class RepeatGuard:
    """Counts calls by what they asked: the second failure of the very same call is named to the model, and so is
    the same call giving the same output as last time (a loop that changes nothing)."""

    def __init__(self) -> None:
        self.failures: dict[str, int] = {}
        self.last: dict[str, str] = {}  # a call -> its last output

    def note(self, name: str, args: dict[str, Any], output: str, is_error: bool) -> str:
        """``output``, with a plain warning when this call has failed before with the same input, or gave the
        same output last time."""
        key = json.dumps([name, args], sort_keys=True, default=str)
        same, self.last[key] = self.last.get(key) == output, output
        failed = is_error or (name == "bash" and not output.startswith("exit code 0"))
        if not failed:
            if same and name == "bash":
                return (f"{output}\n\n[replaybook] `{args.get('command')}` gave exactly this output last time too: "
                        "running it again changes nothing. Do the next step, or call `finish`.")
            return output
        count = self.failures[key] = self.failures.get(key, 0) + 1
        if count < 2:
            return output
        what = f"`{args.get('command')}`" if name == "bash" else f"this {name} call"
        return (f"{output}\n\n[replaybook] {what} has now failed {count} times with the same input. Running it "
                "again will fail again. Read the error above and do something different: look at the files "
                "(ls, grep -rn, read), change the command, or call `finish`.")


class ToolError(Exception):
    pass


class BuiltinAgent:
    name = "builtin"
    version = VERSION

    def run(self, job: AgentRun) -> AgentResult:
        system = SYSTEM + ("\n\n" + job.system_prompt if job.system_prompt.strip() else "")
        history: list[dict[str, Any]] = [{"role": "user", "content": job.task}]
        transcript: list[dict[str, Any]] = []
        guard = RepeatGuard()
        for turn in range(1, job.max_turns + 1):
            if job.remaining_s <= 0:
                return self._result("timeout", transcript, turn - 1, reason="wall-clock timeout")
            try:
                reply = messages.create(job.gateway.url, job.gateway.token, {
                    "model": job.model, "max_tokens": ANSWER_TOKENS, "system": system, "messages": history,
                    "tools": TOOLS, "tool_choice": {"type": "any"}},
                    timeout=max(1.0, min(600.0, job.remaining_s)))
            except messages.APITimeoutError:
                return self._result("timeout", transcript, turn - 1, reason="model call timed out")
            except messages.APIError as exc:
                kind = "budget" if exc.status_code == 402 else "api_error"
                return self._result(kind, transcript, turn - 1, reason=f"model API error: {exc}"[:300])
            content = [{k: v for k, v in block.items() if v is not None}
                       for block in reply.get("content") or [] if isinstance(block, dict)]
            for index, block in enumerate(content):  # a weak model's call with no id still gets its answer
                if block.get("type") == "tool_use" and not (isinstance(block.get("id"), str) and block["id"]):
                    block["id"] = f"toolu_rb_{turn}_{index}"
            history.append({"role": "assistant", "content": content})
            transcript.append({"role": "assistant", "content": content, "stop_reason": reply.get("stop_reason")})
            uses = [b for b in content if b.get("type") == "tool_use"]
            text = "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
            if not uses and reply.get("stop_reason") == "max_tokens":
                history.append({"role": "user", "content": RUNAWAY})
                transcript.append({"role": "user", "content": RUNAWAY})
                continue
            finish = next((u for u in uses if u.get("name") == "finish"), None)
            if not uses or (finish is not None and len(uses) == 1):
                summary = (finish or {}).get("input") or {}
                summary = summary.get("summary") if isinstance(summary, dict) else None
                final = "\n".join(t for t in (text, summary if isinstance(summary, str) else "") if t)
                return self._result("finished", transcript, turn, final_text=final)
            results = [self._call(job, use, guard) for use in uses]
            results += job.scoped.pending(turn + 1) if job.scoped else []  # a scoped rule, once its trigger fired
            history.append({"role": "user", "content": results})
            transcript.append({"role": "user", "content": results})
        return self._result("max_turns", transcript, job.max_turns, reason=f"used all {job.max_turns} turns")

    def _result(self, status, transcript, turns, *, final_text="", reason="") -> AgentResult:
        raw = "\n".join(json.dumps(m, ensure_ascii=False) for m in transcript)
        return AgentResult(status=status, final_text=final_text, raw=raw, reason=reason, turns=turns,
                           version=self.version)

    def _call(self, job: AgentRun, use: dict[str, Any], guard: RepeatGuard) -> dict[str, Any]:
        name, args = use.get("name"), use.get("input")
        name = name if isinstance(name, str) else ""
        args = {} if args is None else args
        try:
            if not isinstance(args, dict):  # a malformed call (a weak model's): the model hears of it, as of any error
                raise ToolError(f"the input of a tool call must be a JSON object, not {type(args).__name__}; "
                                'e.g. {"command": "ls"} for bash')
            if name == "finish":  # beside other calls: those run, and the model finishes on its own turn
                raise ToolError("call `finish` alone, in an answer of its own, once the other calls are done")
            output = _bash(job, args, use.get("id")) if name == "bash" else _TOOLS[name](job, args)
            is_error = False
        except (ToolError, OSError) as exc:  # e.g. writing under a file: the model hears of it
            output, is_error = str(exc), True
        except KeyError:
            output, is_error = f"unknown tool {name!r}; use bash, read, write, edit or finish", True
        if len(output) > MAX_TOOL_OUTPUT:
            output = output[:MAX_TOOL_OUTPUT] + f"\n[{len(output) - MAX_TOOL_OUTPUT} characters cut]"
        output = guard.note(name, args if isinstance(args, dict) else {}, output, is_error)
        if job.on_tool_call:
            job.on_tool_call(name=name, input=args, id=use.get("id"), is_error=is_error, output=output)
        return {"type": "tool_result", "tool_use_id": use.get("id"), "content": output, "is_error": is_error}


def _path(args: dict[str, Any]) -> str:
    raw = args.get("path")
    if not isinstance(raw, str) or not raw:
        raise ToolError("`path` is required")
    if "\0" in raw:
        raise ToolError("`path` holds a NUL byte; no file can be named so")
    if raw.startswith("/"):
        raise ToolError(f"{raw} is outside the repository")
    return raw


def _bash(job: AgentRun, args: dict[str, Any], tool_call_id: str | None = None) -> str:
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ToolError("`command` is required")
    if job.remaining_s <= 0:
        raise ToolError("no time left")
    bash = job.sandbox.which("bash") or "/bin/bash"
    if not job.sandbox.root.is_dir():
        raise ToolError("the repository folder no longer exists")
    # Every process this call starts belongs to it (the kernel trace, by process tree); the id also reaches the
    # PATH shims, which keep the record under --sandbox docker.
    env = {**job.sandbox.env(), TOOL_ENV: tool_call_id or "tool"}
    done = job.sandbox.run([bash, "-c", command], env=env, timeout_s=max(0.1, min(job.remaining_s, 300.0)),
                           tool_call=tool_call_id or "tool")
    tail = " (timed out)" if done.timed_out else ""
    return f"exit code {done.rc}{tail}\n{done.stdout}{done.stderr}"


def _read(job: AgentRun, args: dict[str, Any]) -> str:
    return _file_tool(job, "read", _path(args))


def _write(job: AgentRun, args: dict[str, Any]) -> str:
    content = args.get("content")
    if not isinstance(content, str):
        raise ToolError("`content` must be a string")
    _file_tool(job, "write", _path(args), content=content)
    return f"wrote {len(content)} characters to {args['path']}"


def _edit(job: AgentRun, args: dict[str, Any]) -> str:
    old, new = args.get("old"), args.get("new")
    if not isinstance(old, str) or not isinstance(new, str) or not old:
        raise ToolError("`old` (non-empty) and `new` must be strings")
    _file_tool(job, "edit", _path(args), old=old, new=new)
    return f"edited {args['path']}"


def _file_tool(job: AgentRun, op: str, path: str, **args: str) -> str:
    """Done by the sandbox (``Sandbox.file_tool``): inside it under bwrap, one folder at a time, no link out."""
    try:
        return job.sandbox.file_tool(op, path, **args)
    except FileToolError as exc:
        raise ToolError(str(exc)) from None


_TOOLS = {"bash": _bash, "read": _read, "write": _write, "edit": _edit}
