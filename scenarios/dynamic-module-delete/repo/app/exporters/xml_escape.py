"""Escaping for the XML feed."""

_TABLE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"})


def escape(text: str) -> str:
    return str(text).translate(_TABLE)
