"""The `tbuild` command: one thin module per command group."""

from __future__ import annotations

import typer

from . import common
from .attention import attention
from .average import average
from .data import data_app
from .decode import decode
from .evaluate import evaluate
from .export import export
from .inspect import inspect
from .plot import plot
from .specs import components, schema, validate
from .train import train

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
app.command()(train)
app.command()(average)
app.command()(decode)
app.command()(evaluate)
app.command()(export)
app.command()(attention)
app.command()(plot)
app.add_typer(data_app, name="data")


def main() -> None:
    app()
