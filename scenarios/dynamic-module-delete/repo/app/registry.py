"""Find the exporter class for a format name.

config/exporters.ini maps each name to "module:Class" inside app.exporters;
the module is imported only when that format is asked for.
"""

from __future__ import annotations

import configparser
import importlib
from pathlib import Path

CONFIG = Path(__file__).resolve().parent.parent / "config" / "exporters.ini"
PACKAGE = "app.exporters"


def formats(config: Path = CONFIG) -> dict[str, str]:
    """Format name -> "module:Class", as configured."""
    parser = configparser.ConfigParser()
    parser.read(config, encoding="utf-8")
    return dict(parser["exporters"])


def load(name: str, config: Path = CONFIG):
    """Return a new exporter for ``name``; KeyError if it is not configured."""
    module_name, _, class_name = formats(config)[name].partition(":")
    module = importlib.import_module(f"{PACKAGE}.{module_name}")
    return getattr(module, class_name)()
