"""`tbuild average`: average the last K checkpoints of a run (§6.1)."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import console, guarded
from .options import OUTPUT, SET_OPTION, TARGET


@guarded
def average(
    target: Path = TARGET,
    last: int | None = typer.Option(None, "--last", min=1, help="How many of the newest checkpoints (default: the "
                                    "spec's train.average_last, at most its keep_last; §6.1: 5 base, 20 big)."),
    output: Path | None = OUTPUT("RUN/averaged_lastK.safetensors"),
    set_: list[str] = SET_OPTION,
) -> None:
    """Average the weights of the newest K checkpoints into a new checkpoint."""
    from tbuild.engine.run.checkpoint import average_checkpoints, save_weights
    from tbuild.engine.run.directory import resolve_run

    run = resolve_run(target, set_)
    k = last or run.spec.train.averaged
    paths = run.dir.newest(k)
    tensors, meta = average_checkpoints(paths)
    out = output or run.dir.path / f"averaged_last{k}.safetensors"
    save_weights(out, tensors, meta)
    console.print(f"averaged {', '.join(p.name for p in paths)} -> {out}", highlight=False)
