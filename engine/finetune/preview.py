"""The load plan of a spec's ``train.init`` before any training (``tbuild inspect``): built on the meta
device against the source's checkpoint, with the tokenizer the run will use where it is known."""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from tbuild.builder import build_model
from tbuild.builder.loader import LoadedSpec
from tbuild.builder.spec import InitSpec

from ..data.tokenizer import Tokenizer, fit_vocab
from ..run.directory import RunDir, load_target, run_dir_of
from ..tasks.registry import task_of
from .plan import make_plan
from .source import Source
from .start import checked_source, init_located
from .vocab import extend_tokenizer


def preview_plan(loaded: LoadedSpec) -> list[str]:
    """Lines saying what ``train.init`` loads, remaps, leaves new and freezes (per block) and which of the
    source's tensors it leaves out, or where the run already started from; its refusals name the spec's
    line."""
    with init_located(loaded):
        return _preview(loaded)


def _preview(loaded: LoadedSpec) -> list[str]:
    init = loaded.spec.train.init
    if init is None:
        return []
    run = run_dir_of(loaded)
    lineage = run.lineage()
    if lineage is not None and run.resume_points():
        return [f"train.init: {run.path} started from {lineage['from']} ({lineage['weights']}, step "
                f"{lineage['step']:,}); training resumes it"]
    untrained = _untrained(init)
    if untrained is not None:
        return [f"train.init: from {init.source}: {untrained}; the load plan is shown once the source is trained"]
    source = checked_source(loaded.spec)
    with tempfile.TemporaryDirectory() as tmp:
        path = _tokenizer_path(loaded, run, source, Path(tmp))
        if path is None:
            return [f"train.init: from {source.run.dir.path} ({source.weights}, step {source.step:,})",
                    f"  vocab {init.vocab}: the plan needs this run's own tokenizer, trained when training starts "
                    "(`tbuild data prepare SPEC` trains it now)"]
        own = loaded.spec.data.tokenizer.special
        tokenizer = Tokenizer.load(path, source.run.spec.data.tokenizer.special if path == source.tokenizer else own)
        quiet = lambda _: None  # noqa: E731
        spec = task_of(loaded.spec).fit_labels(fit_vocab(loaded.spec, tokenizer, quiet), quiet)  # a head's labels
        with torch.device("meta"):  # shapes only: nothing allocated
            model = build_model(spec)
        plan = make_plan(model, source, init, tokenizer)
    return plan.lines()


def _untrained(init: InitSpec) -> str | None:
    """Why the source has no weights yet (its run not trained, or not started), or None where it has some."""
    path = Path(init.source)
    if not path.exists():
        return "no such run yet"
    if path.suffix == ".safetensors":
        return None
    if path.is_dir():
        run, hint = RunDir(path), ""
        if not run.spec_file.exists():
            return f"not a run directory yet (no {run.spec_file.name})"
    else:
        run, hint = run_dir_of(load_target(path, [])), f" (`tbuild train {path}` trains it)"
    if run.best.exists() or run.step_checkpoints():
        return None
    return f"its run {run.path} has no checkpoints yet{hint}"


def _tokenizer_path(loaded: LoadedSpec, run: RunDir, source: Source, tmp: Path) -> Path | None:
    """The tokenizer the run will train with, where it is known before training."""
    init, named = loaded.spec.train.init, loaded.spec.data.tokenizer.model
    if named is not None:
        return Path(named)
    if init.vocab == "refuse":
        return run.tokenizer if run.tokenizer.is_file() else source.tokenizer
    if not run.tokenizer.is_file():
        return None
    if init.vocab == "extend":  # the run's own, not yet extended: extend a copy
        extend_tokenizer(source.tokenizer, run.tokenizer, tmp / "spm.model")
        return tmp / "spm.model"
    return run.tokenizer
