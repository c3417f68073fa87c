"""``mini-swe-agent``: SWE-bench's reference agent (PyPI ``mini-swe-agent``, pinned), its ``mini`` CLI headless.

It calls the model through litellm as ``anthropic/MODEL``, so the gateway's
Messages API serves it (``ANTHROPIC_BASE_URL``, the per-run token as the
key). The playbook is appended to its system template, escaped so that no
``{`` in a rule can reach Jinja. Its ``bash`` tool calls are read from the
trajectory file it writes; its commands are recorded by the kernel trace.

Each of its turns is a tool call: litellm is given ``tool_choice: "required"`` (the Messages API's ``any``; the
local model's server holds it by a grammar) and an answer sized to a call (``ANSWER_TOKENS``); it finishes with
its own ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

from bot.replay.agents import AgentResult, AgentRun, install

PIN = install.PINS["mini-swe-agent"]
SYSTEM = "You are a helpful assistant that can interact with a computer."
ANSWER_TOKENS = 1024


def jinja_literal(text: str) -> str:
    """``text`` as a Jinja template that renders to exactly ``text``: every ``{`` becomes an expression."""
    return text.replace("{", "{{ '{' }}")


class MiniSweAgent(install.PinnedCLI):
    name = "mini-swe-agent"
    title = "mini-swe-agent"

    def reads(self) -> tuple[str, ...]:
        if not self.binary:
            return ()
        # The venv the pinned copy lives in (bin/mini and its lib/), resolved through symlinks.
        venv = Path(self.binary).parent.parent
        return tuple(sorted({str(venv), os.path.realpath(venv)}))

    def run(self, job: AgentRun) -> AgentResult:
        self.require_binary()
        system = SYSTEM + ("\n\n" + job.system_prompt if job.system_prompt.strip() else "")
        system += job.scoped.at_start() if job.scoped else ""  # a scoped rule, as Codex reads it: at start or never
        config = job.sandbox.tmpdir / "mini-replaybook.yaml"
        model_kwargs = {"drop_params": True, "tool_choice": "required", "max_tokens": ANSWER_TOKENS}
        config.write_text(yaml.safe_dump({"agent": {"system_template": jinja_literal(system),
                                                    "step_limit": job.max_turns},
                                          "model": {"model_kwargs": model_kwargs}}), encoding="utf-8")
        trajectory = job.sandbox.tmpdir / "mini.traj.json"
        python = str(Path(self.binary).parent / "python")
        argv = [python, self.binary, "-y", "--exit-immediately", "-l", "0", "-m", f"anthropic/{job.model}",
                "-c", "mini.yaml", "-c", str(config), "-o", str(trajectory), "-t", job.task]
        env = job.sandbox.env()
        env.update(job.gateway.agent_env())
        env.update({"MSWEA_CONFIGURED": "1", "MSWEA_COST_TRACKING": "ignore_errors", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                    "ANTHROPIC_API_BASE": job.gateway.url, "NO_COLOR": "1", "TERM": "dumb"})
        done = job.sandbox.run(argv, env=env, timeout_s=max(0.1, job.remaining_s), stdin="",
                               endpoints=(job.gateway.port,))
        raw = done.stdout + ("\n[stderr]\n" + done.stderr if done.stderr else "")
        try:
            data = json.loads(trajectory.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        return self.parse(data, raw=raw, rc=done.rc, timed_out=done.timed_out, job=job)

    def parse(self, data: Any, *, raw: str, rc: int, timed_out: bool, job: AgentRun | None = None) -> AgentResult:
        base = {"raw": raw, "version": self.version}
        if timed_out:
            return AgentResult(status="timeout", reason="wall-clock timeout", **base)
        if not isinstance(data, dict):
            return AgentResult(status="crashed", reason=f"no trajectory (exit {rc}): {raw.strip()[-300:]}", **base)
        pending: dict[str, Any] = {}
        turns, final = 0, ""
        for msg in data.get("messages") or []:
            if not isinstance(msg, dict):
                continue
            if msg.get("role") == "assistant":
                turns += 1
                final = msg.get("content") if isinstance(msg.get("content"), str) else final
                for call in msg.get("tool_calls") or []:
                    try:
                        pending[call["id"]] = json.loads(call["function"]["arguments"])
                    except (KeyError, TypeError, ValueError):
                        continue
            elif msg.get("role") == "tool" and job and job.on_tool_call:
                output = msg.get("content") if isinstance(msg.get("content"), str) else json.dumps(msg.get("content"))
                job.on_tool_call(name="bash", input=pending.get(msg.get("tool_call_id"), {}),
                                 id=msg.get("tool_call_id"), is_error='"returncode": 0' not in output, output=output)
        exit_status = str((data.get("info") or {}).get("exit_status") or "")
        if exit_status == "Submitted":
            return AgentResult(status="finished", final_text=final or "", turns=turns, **base)
        if exit_status == "LimitsExceeded":
            return AgentResult(status="max_turns", final_text=final or "", turns=turns, reason="used every step", **base)
        return AgentResult(status="api_error" if turns == 0 else "crashed", final_text=final or "", turns=turns,
                           reason=f"exit status {exit_status or 'none'} (exit {rc})", **base)
