"""The trace: what happened in one run, recorded from outside the agent.

The trace's events and its JSONL file, the kernel's record of every ``execve`` (seccomp user
notification), the PATH shims and their command log, interpreter launchers, and which tool call
ran each command.
"""
