"""The `tbuild` command: one thin module per command group."""

from __future__ import annotations

import typer

from . import common
from .inspect import inspect
from .specs import components, schema, validate

app = typer.Typer(
    help="Build, train, decode and evaluate Transformer translation models from YAML specs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _options(debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors.")) -> None:
    common.state["debug"] = debug


app.command()(inspect)
app.command()(validate)
app.command()(schema)
app.command()(components)


def main() -> None:
    app()
