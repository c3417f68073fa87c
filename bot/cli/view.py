"""``replaybook view``: one static HTML page for a gate, written from its JSON and run folders; served locally."""

from __future__ import annotations

import functools
import http.server
from pathlib import Path

import click

from bot._util.credentials import host_redactor
from bot.errors import BadInput
from bot.view import page as page_mod


@click.command("view")
@click.argument("gate_json", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder to write the page to (index.html); created if missing.")
@click.option("--runs-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where the gate kept its run folders (default: config paths.traces); a trial's folder is found "
                   "there by its name.")
@click.option("--suite", "suite_dir", type=click.Path(file_okay=False, path_type=Path),
              help="The scenarios, to decide each trial's checks again from its run folder (default: config "
                   "paths.scenarios).")
@click.option("--agent", help="For a gate of several agents: the agent whose gate to show.")
@click.option("--serve", is_flag=True, help="Then serve the page on 127.0.0.1 until Ctrl-C.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="With --serve: the port (0: any free one).")
@click.pass_context
def command(ctx: click.Context, gate_json: Path, out_dir: Path, runs_dir: Path | None, suite_dir: Path | None,
            agent: str | None, serve: bool, port: int) -> None:
    """Write one self-contained HTML page for a gate: why it decided, each scenario's trials without and
    with the rule side by side, each trial's turns, kernel trace, checks, diff and delivery.

    GATE_JSON is what `replaybook gate RULE --json` prints. The page works offline (no script, no
    request at load); every secret this process knows is redacted from it.
    """
    if not gate_json.is_file():
        raise BadInput(f"{gate_json}: no such file; write it with `replaybook gate RULE --json > {gate_json}`")
    settings = ctx.obj.settings
    redactor = host_redactor()
    gate = page_mod.load_gate(gate_json, redactor, agent)
    suite = suite_dir or settings.path("scenarios")
    page = page_mod.build(gate, runs_dir or settings.path("traces"), suite if suite.is_dir() else None, redactor)
    out_dir.mkdir(parents=True, exist_ok=True)
    index = out_dir / "index.html"
    index.write_text(page_mod.render(page, redactor), encoding="utf-8")
    click.echo(f"{index} ({index.stat().st_size / 1e6:.2f} MB; {page.kept} run folder(s) read)")
    if serve:
        _serve(out_dir, port)


def _serve(folder: Path, port: int) -> None:
    """Serve ``folder`` on 127.0.0.1 (stdlib http.server) until Ctrl-C."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError as exc:
        raise BadInput(f"--port {port}: cannot serve there ({exc.strerror}); give another port, or --port 0 for "
                       "any free one") from None
    with server:
        click.echo(f"serving http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            click.echo("stopped")
