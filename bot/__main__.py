"""``python -m bot`` is ``replaybook``."""

from bot.cli.main import main

main()
