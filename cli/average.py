"""`tbuild average`: average the last K checkpoints of a run (§6.1)."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import console, guarded


@guarded
def average(
    run: Path = typer.Argument(..., help="A run directory."),
    last: int = typer.Option(5, "--last", "-k", help="How many of the newest checkpoints (§6.1: 5 base, 20 big)."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Default: RUN/averaged_lastK.safetensors."),
) -> None:
    """Average the weights of the newest K checkpoints into a new checkpoint."""
    from tbuild.engine.checkpoint import average_checkpoints, save_weights
    from tbuild.engine.run_dir import RunDir

    paths = RunDir(run).newest(last)
    tensors, meta = average_checkpoints(paths)
    out = output or run / f"averaged_last{last}.safetensors"
    save_weights(out, tensors, meta)
    console.print(f"averaged {', '.join(p.name for p in paths)} -> {out}")
