"""Fixtures the GitHub feature tests share."""

from __future__ import annotations

import pytest
from fakes.port import FakePort


@pytest.fixture
def port() -> FakePort:
    """A fresh in-memory port (``FakePort``): the repository a feature test's handler sees."""
    return FakePort()
