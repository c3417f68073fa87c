"""Every command pays for what `replaybook` imports at start: the SDKs load only when a command needs them."""

from __future__ import annotations

import subprocess
import sys


def test_the_cli_starts_without_the_anthropic_sdk_or_pygithub():
    code = "import sys, bot.cli.main; print(sorted(m for m in ('anthropic', 'github') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"  # anthropic alone took 1.4 s of a 1.7 s start
