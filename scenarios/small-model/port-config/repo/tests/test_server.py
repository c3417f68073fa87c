import re
from pathlib import Path

from app.server import port


def test_port_is_a_number():
    assert 1 <= port() <= 65535


def test_the_image_exposes_the_port_the_server_listens_on():
    dockerfile = Path(__file__).resolve().parent.parent / "Dockerfile"
    assert re.search(r"^EXPOSE (\d+)$", dockerfile.read_text(), re.M).group(1) == str(port())
