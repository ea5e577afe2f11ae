"""`tbuild plot`: a PNG of the training and validation curves."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import console, guarded


@guarded
def plot(
    run: Path = typer.Argument(..., help="A run directory."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Default: RUN/curves.png."),
) -> None:
    """Plot training loss/NLL and validation perplexity against steps."""
    from tbuild.engine.plots import plot_curves

    out = plot_curves(run, output or run / "curves.png")
    console.print(f"wrote {out}")
