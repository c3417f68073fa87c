"""``command``: any other agent CLI, from a command template.

The template is split like a shell would (``shlex``) but never run by a
shell; ``{task}`` and ``{playbook_file}`` are replaced inside each argument.
The agent finds the gateway in ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_API_KEY``
(a per-run token) and its commands are recorded through ``$SHELL`` and PATH.
"""

from __future__ import annotations

import os
import shlex
import shutil

from bot.errors import BadInput
from bot.replay.agents import AgentResult, AgentRun, direct_argv

PLACEHOLDERS = ("{task}", "{playbook_file}")


class CommandAgent:
    name = "command"

    def __init__(self, template: str):
        try:
            self.argv = shlex.split(template)
        except ValueError as exc:
            raise BadInput(f"--command: cannot split {template!r}: {exc}") from None
        if not self.argv:
            raise BadInput("--command is empty; give the agent's command line with {task} and {playbook_file}")
        if not any(p in arg for arg in self.argv for p in PLACEHOLDERS):
            raise BadInput("--command uses neither {task} nor {playbook_file}; the agent would not get the task")
        self.version = "command:" + self.argv[0]

    def reads(self) -> tuple[str, ...]:
        """What the sandbox must let the agent read: the existing files and folders its template names."""
        from bot.replay.sandbox.isolation import exposure, needs_bind

        program = shutil.which(self.argv[0])
        out = [exposure(program)] if program and needs_bind(program) else []
        out += [os.path.realpath(a) for a in self.argv[1:] if os.path.isabs(a) and os.path.exists(a)]
        return tuple(out)

    def run(self, job: AgentRun) -> AgentResult:
        playbook = job.sandbox.tmpdir / "playbook.md"
        playbook.write_text(job.system_prompt, encoding="utf-8")
        argv = [a.replace("{task}", job.task).replace("{playbook_file}", str(playbook)) for a in self.argv]
        argv[:1] = direct_argv(argv[0], job.sandbox)
        env = job.sandbox.env()
        env.update(job.gateway.agent_env())
        try:
            done = job.sandbox.run(argv, env=env, timeout_s=max(0.1, job.remaining_s), stdin="",
                                   endpoints=(job.gateway.port,))
        except OSError as exc:
            return AgentResult(status="crashed", reason=f"could not start {argv[0]}: {exc.strerror}", version=self.version)
        raw = done.stdout + ("\n[stderr]\n" + done.stderr if done.stderr else "")
        if done.timed_out:
            return AgentResult(status="timeout", raw=raw, reason="wall-clock timeout", version=self.version)
        if done.rc < 0 or done.rc in (126, 127):  # killed by a signal, or could not run at all
            return AgentResult(status="crashed", raw=raw, reason=f"exit code {done.rc}", version=self.version)
        if done.rc != 0 and not job.gateway.calls and not job.sandbox.commands():  # died before doing anything
            return AgentResult(status="crashed", raw=raw, version=self.version,
                               reason=f"exit code {done.rc} before its first model call: {done.stderr.strip()[-200:]}")
        # Any other exit code is the agent's own verdict on its work: the checks decide.
        return AgentResult(status="finished", final_text=done.stdout[-4000:], raw=raw,
                           reason=f"exit code {done.rc}" if done.rc else "", version=self.version)
