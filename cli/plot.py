"""`tbuild plot`: a PNG of the training and validation curves."""

from __future__ import annotations

from pathlib import Path

from .common import console, guarded
from .options import OUTPUT, TARGET


@guarded
def plot(target: Path = TARGET, output: Path | None = OUTPUT("RUN/curves.png")) -> None:
    """Plot training loss/NLL and validation perplexity against steps."""
    from tbuild.engine.figures.plots import plot_curves
    from tbuild.engine.run.directory import resolve_run

    run = resolve_run(target)
    out = plot_curves(run.dir.path, output or run.dir.path / "curves.png")
    console.print(f"wrote {out}", highlight=False)
