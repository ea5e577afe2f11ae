"""The one weights loader: which weights of a run a command uses, loaded and checked into a model."""

from __future__ import annotations

from pathlib import Path

from torch import nn

from ..errors import CheckpointError, TbuildError
from .adapters import folded
from .checkpoint import average_checkpoints, load_model_weights, read_checkpoint
from .directory import Run


def load_weights(model: nn.Module, run: Run, *, checkpoint: Path | None = None, average: int | None = None) -> str:
    """Load into ``model`` a named checkpoint, the average of the newest ``average`` checkpoints (§6.1;
    0: the spec's ``train.averaged``), else the best by validation perplexity, else the newest
    checkpoint. Refuses weights of another architecture or that do not fit the model.
    Returns which weights were loaded, for reports."""
    expect = run.spec.architecture_hash()
    paths = weights_files(run, checkpoint=checkpoint, average=average)
    adapted = run.spec.train.adapters is not None
    if adapted and average is not None:
        raise TbuildError(f"{run.dir.path}: an adapter run's checkpoints are not averaged (the mean of B and of A "
                          "is not the mean update); name one with --checkpoint")
    if average is not None:
        tensors, meta = average_checkpoints(paths)
        source, description = paths[-1], f"average of {', '.join(p.name for p in paths)}"
    else:
        source = paths[0]
        tensors, meta = read_checkpoint(source, model_only=True)
        description = source.name
    if meta.get("architecture") != expect:
        raise CheckpointError(f"{source}: checkpoint is of another model (architecture {meta.get('architecture')}, "
                              f"spec has {expect})")
    load_model_weights(model, folded(run.dir.path, tensors) if adapted else tensors, source)
    return description


def weights_files(run: Run, *, checkpoint: Path | None = None, average: int | None = None) -> list[Path]:
    """The file(s) ``load_weights`` reads for these options, without reading them."""
    if average is not None:
        return run.dir.newest(average or run.spec.train.averaged)
    return [checkpoint or run.checkpoint or _default(run)]


def file_stamp(path: Path) -> dict:
    """What says a file is still the one read before: its resolved path, size and modification time (a
    cache key: exports, the decode precision record)."""
    st = path.stat()
    return {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _default(run: Run) -> Path:
    if run.dir.best.exists():
        return run.dir.best
    newest = run.dir.step_checkpoints()[-1:]
    if not newest:
        raise TbuildError(f"{run.dir.path}: no checkpoints; train it first with `tbuild train`")
    return newest[0]
