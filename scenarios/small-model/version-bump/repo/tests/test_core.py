from pathlib import Path

import app
from app.core import total


def test_total():
    assert total([(2, 1.5), (1, 0.25)]) == 3.25


def test_the_version_file_and_the_package_agree():
    assert Path(__file__).parent.parent.joinpath("VERSION").read_text().strip() == app.__version__
