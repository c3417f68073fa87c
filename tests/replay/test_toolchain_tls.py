"""Toolchains build where users are: behind a TLS-inspecting proxy whose CA is in the system trust store.

The proxy is a local HTTPS package index whose certificate is signed by a CA
of the test's own. That CA is made the *system* trust store of a child
process (a private mount namespace binds a folder holding only it over
``/etc/ssl/certs``), and the real ``toolchain.prepare`` builds an environment
from a hand-made wheel on that index with the real uv. pip trusts the system
store; uv does only when told to.
"""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import ssl
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import hand_made_wheel

from bot.replay.sandbox import toolchain


def _can_remount() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(not _can_remount(), reason="needs `unshare -rm` (user and mount namespaces)")


def proxy_ca_and_server_cert(folder: Path) -> tuple[Path, Path, Path]:
    """A CA (the proxy's) and a certificate for 127.0.0.1 signed by it."""
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=Inspecting Proxy CA", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=127.0.0.1")
    (folder / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                                    "extendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "srv.pem", "-days", "2", "-extfile", "ext.cnf")
    return folder / "ca.pem", folder / "srv.pem", folder / "srv.key"


@pytest.fixture
def proxied_index(tmp_path):
    """(index URL, a folder to bind over /etc/ssl/certs holding only the proxy's CA)."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    root = tmp_path / "index"
    root.mkdir()
    hand_made_wheel(root)
    ca, cert, key = proxy_ca_and_server_cert(tmp_path)
    store = tmp_path / "system-certs"
    store.mkdir()
    (store / "ca-certificates.crt").write_text(ca.read_text())
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_address[1]}/simple", store
    server.shutdown()
    server.server_close()


BUILD = """
import json, sys
from pathlib import Path
from bot.errors import BadInput, InfrastructureError
from bot.replay.sandbox import toolchain
try:
    tools = toolchain.prepare(["rbprobe==1.0"], cache_dir=Path(sys.argv[1]), where="tls-test")
except (BadInput, InfrastructureError) as exc:
    print(json.dumps({"error": str(exc)}))
else:
    print(json.dumps({"bin_dir": tools.bin_dir}))
"""


def test_the_toolchain_builds_behind_a_proxy_whose_ca_only_the_system_trusts(proxied_index, tmp_path):
    index, store = proxied_index
    cache = tmp_path / "cache"
    # No SSL_CERT_FILE / SSL_CERT_DIR: the CA is trusted only through the system store.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), "UV_INDEX_URL": index, "UV_NO_CACHE": "1",
           "PYTHONPATH": str(Path(toolchain.__file__).resolve().parents[2])}
    script = f"mount --bind {store} /etc/ssl/certs && exec {sys.executable} -c '{BUILD}' {cache}"
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "error" not in result, result["error"]
    python = Path(result["bin_dir"]) / "python"
    imported = subprocess.run([str(python), "-c", "import rbprobe; print(rbprobe.VALUE)"], capture_output=True,
                              text=True)
    assert imported.stdout.strip() == "42", imported.stderr


def test_every_uv_step_trusts_the_system_store() -> None:
    steps = toolchain.build_steps("/x/uv", (0, 13, 9), Path("/env"), "/usr/bin/python3", Path("/reqs.txt"))
    assert [s[1:3] for s in steps] == [["venv", "--system-certs"], ["pip", "install"]]
    assert all("--system-certs" in s for s in steps)
    # uv before 0.11 knows only the older name of the same switch.
    assert all("--native-tls" in s for s in toolchain.build_steps("uv", (0, 9, 0), Path("/e"), "py", Path("/r")))


def test_the_toolchain_reads_no_installer_config_of_the_folder_it_is_started_in(proxied_index, tmp_path):
    """The judge's seat (issue 53): a gate started in a checkout under test builds the scenario's environment in
    its own folder, Python isolated, so a PR's ``uv.toml`` cannot redirect uv's installs (``[pip] target``)."""
    index, store = proxied_index
    head = tmp_path / "head"
    stolen = tmp_path / "stolen"
    head.mkdir()
    (head / "uv.toml").write_text(f'[pip]\ntarget = "{stolen}"\n')
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), "UV_INDEX_URL": index, "UV_NO_CACHE": "1",
           "PYTHONPATH": str(Path(toolchain.__file__).resolve().parents[2])}
    script = f"mount --bind {store} /etc/ssl/certs && exec {sys.executable} -c '{BUILD}' {tmp_path / 'cache'}"
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script], env=env, cwd=head, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "error" not in result, result["error"]
    assert not stolen.exists()
    python = Path(result["bin_dir"]) / "python"
    imported = subprocess.run([str(python), "-c", "import rbprobe"], capture_output=True, text=True)
    assert imported.returncode == 0, imported.stderr
