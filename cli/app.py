"""The `tbuild` command: one thin module per command group."""

from __future__ import annotations

import typer

from . import common
from .attention import attention
from .average import average
from .card import card
from .data import data_app
from .decode import decode
from .embed import embed
from .evalb import evalb
from .evaluate import evaluate
from .export import export
from .generate import generate
from .inspect import inspect
from .merge import merge
from .plot import plot
from .precision import precision
from .pretrained import import_app
from .serve import serve
from .specs import components, schema, validate
from .sweep import sweep
from .train import train
from .tune import tune

app = typer.Typer(
    cls=common.Group,
    help="Build, train, decode and evaluate Transformer translation models from YAML specs.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, PowerShell)
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",  # docstrings wrap as paragraphs
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        common.console.print(f"tbuild {version('tbuild')}", highlight=False)
        raise typer.Exit()


@app.callback()
def _options(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors (also after the command)."),
    _: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    common.state["debug"] = debug


for command in (inspect, validate, schema, components, train, sweep, tune, average, merge, decode, generate, embed,
                evaluate, evalb, export, attention, plot, serve, card, precision):
    app.command(cls=common.Command)(command)
app.add_typer(data_app, name="data")
app.add_typer(import_app, name="import")


def main() -> None:
    app()
