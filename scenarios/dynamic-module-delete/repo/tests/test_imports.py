"""Every module under app/ must import: catches leftovers of removed code."""

import importlib
import pkgutil

import pytest

import app

MODULES = sorted(m.name for m in pkgutil.walk_packages(app.__path__, prefix="app."))


@pytest.mark.parametrize("name", MODULES)
def test_module_imports(name):
    importlib.import_module(name)
