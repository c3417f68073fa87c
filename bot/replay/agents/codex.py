"""``codex``: the real Codex CLI (npm ``@openai/codex``, pinned), headless, reading its ``--json`` events.

It speaks the OpenAI Responses API, so it gets the gateway as a custom model
provider (``wire_api = "responses"``, base URL ``GATEWAY/v1``, the per-run
token in ``OPENAI_API_KEY``). The playbook under test goes in as
``developer_instructions``, a developer message. Codex's own sandbox is off
(``danger-full-access``): the replay sandbox (bwrap) is the isolation, and
the kernel trace records every command, as for any agent.
"""

from __future__ import annotations

import json
from typing import Any

from bot.replay.agents import AgentResult, AgentRun, direct_argv, install

PIN = install.PINS["codex"]
PROVIDER = "replaybook"


def provider_args(base_url: str) -> list[str]:
    out = ["-c", f"model_provider={PROVIDER}"]
    for key, value in (("name", PROVIDER), ("base_url", base_url), ("env_key", "OPENAI_API_KEY"),
                       ("wire_api", "responses"), ("request_max_retries", 0), ("stream_max_retries", 0)):
        out += ["-c", f"model_providers.{PROVIDER}.{key}={json.dumps(value)}"]
    return out


class CodexAgent(install.PinnedCLI):
    name = "codex"
    title = "the Codex CLI"

    def run(self, job: AgentRun) -> AgentResult:
        self.require_binary()
        home = job.sandbox.tmpdir / "codex-home"
        home.mkdir(parents=True, exist_ok=True)
        argv = [self.binary, "exec", "--json", "--skip-git-repo-check", "-s", "danger-full-access",
                "-m", job.model, *provider_args(job.gateway.url + "/v1"),
                "-c", "web_search=\"disabled\"", "-c", "check_for_update_on_startup=false"]
        if job.system_prompt.strip():
            argv += ["-c", f"developer_instructions={json.dumps(job.system_prompt)}"]
        argv += ["--", job.task]
        argv[:1] = direct_argv(self.binary, job.sandbox)
        env = job.sandbox.env()
        env.update(job.gateway.agent_env())
        env.update({"CODEX_HOME": str(home), "NO_COLOR": "1"})
        done = job.sandbox.run(argv, env=env, timeout_s=max(0.1, job.remaining_s), stdin="",
                               endpoints=(job.gateway.port,))
        return self.parse(done.stdout, rc=done.rc, timed_out=done.timed_out, stderr=done.stderr, job=job)

    def parse(self, raw: str, *, rc: int, timed_out: bool, stderr: str = "", job: AgentRun | None = None) -> AgentResult:
        """Read ``codex exec --json``: command items go to the trace; the turn's end decides the status."""
        base = {"raw": raw + ("\n[stderr]\n" + stderr if stderr else ""), "version": self.version}
        end: dict[str, Any] | None = None
        texts: list[str] = []
        turns = 0
        for event in install.json_lines(raw):
            kind, item = event.get("type"), event.get("item") or {}
            if kind == "item.completed" and isinstance(item, dict):
                if item.get("type") == "command_execution":
                    turns += 1
                    if job and job.on_tool_call:
                        code = item.get("exit_code")
                        job.on_tool_call(name="exec_command", input={"command": item.get("command")},
                                         id=item.get("id"), is_error=code not in (0, None),
                                         output=str(item.get("aggregated_output") or ""))
                elif item.get("type") == "agent_message":
                    texts.append(str(item.get("text") or ""))
            elif kind in ("turn.completed", "turn.failed"):
                end = event
        if timed_out:
            return AgentResult(status="timeout", reason="wall-clock timeout", turns=turns, **base)
        final = "\n".join(texts)
        if end is None:
            return AgentResult(status="crashed", reason=f"no turn end (exit {rc}): {stderr.strip()[-300:]}",
                               final_text=final, turns=turns, **base)
        if end["type"] == "turn.failed":
            message = str((end.get("error") or {}).get("message") or "")[:300]
            return AgentResult(status="api_error", reason=message, final_text=final, turns=turns, **base)
        return AgentResult(status="finished", final_text=final, turns=turns, **base)
