"""Generate docs/cli.md from the commands' own help: ``python -m bot.cli.reference``.

A test keeps the file in sync, so every command is documented.
"""

from __future__ import annotations

import click


def walk(command: click.Command, path: list[str], parent: click.Context | None = None):
    """(path, command, context) for ``command`` and every subcommand, depth first."""
    ctx = command.make_context(
        path[-1] if parent else " ".join(path), [], parent=parent, resilient_parsing=True,
        terminal_width=100, max_content_width=100,
    )
    yield path, command, ctx
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            yield from walk(command.commands[name], path + [name], ctx)


def render() -> str:
    from bot.cli.main import cli

    out = [
        "# Command reference",
        "",
        "Generated from the commands' help by `python -m bot.cli.reference > docs/cli.md`; do not edit by hand.",
        "",
        "Exit codes: 0 ok; 1 a failed check or a reject decision; 2 bad input or usage; "
        "3 a bug in Replaybook (the report is written to a file); 130 interrupted.",
    ]
    for path, command, ctx in walk(cli, ["replaybook"]):
        if command.hidden:
            continue
        out += ["", f"## `{' '.join(path)}`", "", "```text", command.get_help(ctx).rstrip(), "```"]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(render(), end="")
