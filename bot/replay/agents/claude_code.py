"""``claude-code``: the real Claude Code CLI, headless, reading its stream-json.

It runs with a private HOME, the gateway as its API (a per-run token, never
the real key) and the sandbox's scrubbing ``$SHELL``, so every command it
runs is recorded and sees no key. Pinned to ``PINNED_VERSION``.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from bot.errors import BadInput
from bot.replay.agents import AgentResult, AgentRun, direct_argv, install
from bot.replay.agents.install import PINS
from bot.replay.sandbox import confined_files

PINNED_VERSION = PINS["claude-code"].version
PACKAGE = PINS["claude-code"].package
ENV_BINARY = PINS["claude-code"].env


def find_cli() -> str | None:
    """``$REPLAYBOOK_CLAUDE_CODE``, the pinned copy in the cache, or ``claude`` on PATH."""
    return install.find("claude-code")


def install_cli(dest: Path | None = None) -> str:
    """Install the pinned CLI from the npm registry into ``dest`` (default: the cache)."""
    return install.install("claude-code", dest)


class ClaudeCodeAgent:
    name = "claude-code"

    def __init__(self, binary: str | None = None):
        self.binary = binary or find_cli()
        self.version = PINNED_VERSION

    def reads(self) -> tuple[str, ...]:
        """What the sandbox must let the CLI read: its installed package."""
        return install.package_root(self.binary)

    def run(self, job: AgentRun) -> AgentResult:
        if not self.binary:
            raise BadInput(
                f"the Claude Code CLI was not found; install it with `npm install -g {PACKAGE}@{PINNED_VERSION}` "
                f"or set {ENV_BINARY}"
            )
        loaded = job.sandbox.tmpdir / "claude-instructions.jsonl"
        argv = [self.binary, "-p", job.task, "--output-format", "stream-json", "--verbose",
                "--max-turns", str(job.max_turns), "--model", job.model, "--dangerously-skip-permissions",
                "--settings", json.dumps(instructions_hook(loaded))]
        if job.system_prompt.strip():
            argv += ["--append-system-prompt", job.system_prompt]
        # Started by absolute path; the kernel trace records every command it and its shells run
        # (under --sandbox docker, the shims on its PATH do, and no shim scrubs the gateway token from it).
        argv[:1] = direct_argv(self.binary, job.sandbox)
        env = job.sandbox.env()
        env.update(job.gateway.agent_env())
        env.update({"IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"})
        done = job.sandbox.run(argv, env=env, timeout_s=max(0.1, job.remaining_s), stdin="",
                               endpoints=(job.gateway.port,))
        result = self.parse(done.stdout, rc=done.rc, timed_out=done.timed_out, stderr=done.stderr, job=job)
        result.loaded = read_loaded(loaded, job.sandbox.root)
        return result

    def parse(self, raw: str, *, rc: int, timed_out: bool, stderr: str = "", job: AgentRun | None = None) -> AgentResult:
        """Read stream-json: tool calls go to the trace; the ``result`` line decides the status."""
        uses: dict[str, dict[str, Any]] = {}
        result: dict[str, Any] | None = None
        for event in install.json_lines(raw):
            kind = event.get("type")
            blocks = (event.get("message") or {}).get("content") or []
            if kind == "assistant":
                for b in blocks:
                    if isinstance(b, dict) and b.get("type") == "tool_use":
                        uses[b.get("id", "")] = b
            elif kind == "user":
                for b in blocks:
                    if isinstance(b, dict) and b.get("type") == "tool_result" and job and job.on_tool_call:
                        use = uses.get(b.get("tool_use_id", ""), {})
                        job.on_tool_call(name=use.get("name", "?"), input=use.get("input"), id=b.get("tool_use_id"),
                                         is_error=bool(b.get("is_error")), output=_text(b.get("content")))
            elif kind == "result":
                result = event
        return self._status(raw, result, rc=rc, timed_out=timed_out, stderr=stderr)

    def _status(self, raw: str, result: dict[str, Any] | None, *, rc: int, timed_out: bool, stderr: str) -> AgentResult:
        base = {"raw": raw, "version": self.version}
        if timed_out:
            return AgentResult(status="timeout", reason="wall-clock timeout", **base)
        if result is None:
            return AgentResult(status="crashed", reason=f"no result line (exit {rc}): {stderr.strip()[-300:]}", **base)
        turns = int(result.get("num_turns") or 0)
        text = result.get("result") if isinstance(result.get("result"), str) else ""
        subtype = result.get("subtype")
        if subtype == "error_max_turns":
            return AgentResult(status="max_turns", final_text=text, turns=turns, reason="used every turn", **base)
        if result.get("is_error") or subtype != "success":
            return AgentResult(status="api_error", final_text=text, turns=turns,
                               reason=f"{subtype}: {text[:200]}", **base)
        return AgentResult(status="finished", final_text=text, turns=turns, **base)


def instructions_hook(log: Path) -> dict[str, Any]:
    """Settings whose ``InstructionsLoaded`` hook appends each event (file_path, memory_type, load_reason, globs)
    to ``log``: which CLAUDE.md and rule files Claude Code loaded, and why (pinned 2.1.328 has the event)."""
    command = f"cat >> {shlex.quote(str(log))}; echo >> {shlex.quote(str(log))}"
    return {"hooks": {"InstructionsLoaded": [{"hooks": [{"type": "command", "command": command}]}]}}


def read_loaded(log: Path, root: Path) -> list[dict[str, str]]:
    """The files the hook logged, relative to ``root`` where they are inside it. The agent could write the log, so
    it only explains, never decides, and is read without following a link out of its folder."""
    try:
        text = confined_files.read_file(str(log.parent), log.name)
    except (confined_files.FileToolError, OSError):
        return []
    out: list[dict[str, str]] = []
    for event in install.json_lines(text):
        path, how = str(event.get("file_path") or ""), str(event.get("load_reason") or "")
        try:
            path = Path(path).relative_to(root).as_posix()
        except ValueError:
            pass
        out.append({"file": path[:200], "how": how[:40]})
    return out[:50]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""
