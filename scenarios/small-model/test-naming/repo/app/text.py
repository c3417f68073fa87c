"""Text helpers."""

import re


def slugify(title: str) -> str:
    """'Hello World' -> 'hello-world'."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def shout(text: str) -> str:
    return text.upper() + "!"
