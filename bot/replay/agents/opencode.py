"""``opencode``: the real opencode CLI (npm ``opencode-ai``, pinned), headless (``opencode run --format json``).

It speaks the Messages API through its ``anthropic`` provider, pointed at the
gateway by config (``provider.anthropic.options.baseURL``; the per-run token
in ``ANTHROPIC_API_KEY``, kept out of the config), all passed in ``OPENCODE_CONFIG_CONTENT``: no file of the
repository or of a HOME is read for config. The playbook under test is an
``instructions`` file, the way opencode reads AGENTS.md, and so is the repository's own root
``AGENTS.md`` (which ``OPENCODE_DISABLE_PROJECT_CONFIG`` would otherwise hide). It runs offline: no
models.dev fetch, no auto-update, no share, no default plugins, no LSP
download, no Claude Code fallbacks (env switches below). Every permission is
``allow``: the replay sandbox (bwrap) is the isolation, and the kernel trace
records every command, as for any agent.
"""

from __future__ import annotations

import json
from typing import Any

from bot.replay.agents import AgentResult, AgentRun, install

PIN = install.PINS["opencode"]
OFFLINE = {f"OPENCODE_{k}": "1" for k in (
    "DISABLE_MODELS_FETCH", "DISABLE_AUTOUPDATE", "DISABLE_SHARE", "DISABLE_DEFAULT_PLUGINS", "DISABLE_LSP_DOWNLOAD",
    "DISABLE_CLAUDE_CODE", "DISABLE_EXTERNAL_SKILLS", "DISABLE_PROJECT_CONFIG", "DISABLE_EMBEDDED_WEB_UI",
    "PURE")}


def config(base_url: str, model: str, instructions: list[str]) -> dict[str, Any]:
    """The whole opencode config for one replay: the gateway as the only provider, everything allowed."""
    return {
        "model": f"anthropic/{model}",
        "autoupdate": False,
        "share": "disabled",
        "snapshot": False,  # its undo snapshots are git commands of its own, not the agent's
        "enabled_providers": ["anthropic"],
        "provider": {"anthropic": {
            "options": {"baseURL": base_url, "timeout": False},  # the key: ANTHROPIC_API_KEY
            "models": {model: {"name": model, "tool_call": True,
                               "limit": {"context": 200000, "output": 8192}}},
        }},
        "permission": {"*": "allow", "bash": "allow", "edit": "allow", "external_directory": "allow"},
        "instructions": instructions,
    }


class OpencodeAgent(install.PinnedCLI):
    name = "opencode"
    title = "opencode"

    def run(self, job: AgentRun) -> AgentResult:
        self.require_binary()
        # The repository's own AGENTS.md, as opencode reads it from the project root: OPENCODE_DISABLE_PROJECT_CONFIG
        # (no repository config) also stops that read (opencode 1.18.33), so it is named here.
        own = job.sandbox.root / "AGENTS.md"
        instructions = [str(own)] if own.is_file() and not own.is_symlink() else []
        if job.system_prompt.strip():
            playbook = job.sandbox.tmpdir / "opencode-playbook.md"
            playbook.write_text(job.system_prompt, encoding="utf-8")
            instructions.append(str(playbook))
        home = job.sandbox.tmpdir / "opencode-home"
        home.mkdir(parents=True, exist_ok=True)
        env = job.sandbox.env()
        env.update(job.gateway.agent_env())
        env.update(OFFLINE)
        env.update({"OPENCODE_CONFIG_CONTENT": json.dumps(config(job.gateway.url + "/v1", job.model, instructions)),
                    "XDG_CONFIG_HOME": str(home / "config"), "XDG_DATA_HOME": str(home / "data"),
                    "XDG_CACHE_HOME": str(home / "cache"), "XDG_STATE_HOME": str(home / "state"),
                    "NO_COLOR": "1", "TERM": "dumb"})
        argv = [self.binary, "run", "--format", "json", "-m", f"anthropic/{job.model}", "--", job.task]
        done = job.sandbox.run(argv, env=env, timeout_s=max(0.1, job.remaining_s), stdin="",
                               endpoints=(job.gateway.port,))
        return self.parse(done.stdout, rc=done.rc, timed_out=done.timed_out, stderr=done.stderr, job=job)

    def parse(self, raw: str, *, rc: int, timed_out: bool, stderr: str = "", job: AgentRun | None = None) -> AgentResult:
        """Read ``opencode run --format json``: finished tool parts go to the trace; errors decide the status."""
        base = {"raw": raw + ("\n[stderr]\n" + stderr if stderr else ""), "version": self.version}
        texts: list[str] = []
        turns, error, steps = 0, "", 0
        for event in install.json_lines(raw):
            kind, part = event.get("type"), event.get("part") or {}
            if not isinstance(part, dict):
                part = {}
            if kind == "tool_use":
                state = part.get("state") or {}
                status = state.get("status") if isinstance(state, dict) else None
                if status in ("completed", "error"):
                    turns += 1
                    if job and job.on_tool_call:
                        output = state.get("output") if status == "completed" else state.get("error")
                        job.on_tool_call(name=str(part.get("tool") or ""), input=state.get("input") or {},
                                         id=part.get("callID"), is_error=status == "error", output=str(output or ""))
            elif kind == "text":
                texts.append(str(part.get("text") or ""))
            elif kind == "step_finish":
                steps += 1
            elif kind == "error":
                error = json.dumps(event.get("error"))[:300]
        if timed_out:
            return AgentResult(status="timeout", reason="wall-clock timeout", turns=turns, **base)
        final = "\n".join(t for t in texts if t)
        if error:
            return AgentResult(status="api_error", reason=error, final_text=final, turns=turns, **base)
        if rc != 0 or steps == 0:
            return AgentResult(status="crashed", reason=f"exit {rc}, {steps} steps: {stderr.strip()[-300:]}",
                               final_text=final, turns=turns, **base)
        return AgentResult(status="finished", final_text=final, turns=turns, **base)
