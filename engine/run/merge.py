"""``tbuild merge``: an adapter run made an ordinary one, each low-rank update folded into its weight
(W + (α/r) · B A): the spec without its adapters or start, the tokenizer, and best.safetensors holding the
whole model; every command then reads it as any trained run."""

from __future__ import annotations

import shutil
from pathlib import Path

from ..errors import TbuildError
from .adapters import BASE_FILE, adapters_of, folded, read_record
from .checkpoint import read_checkpoint, save_weights
from .directory import Run, RunDir
from .weights import weights_files


def check_merge(run: Run, out: Path) -> dict:
    """Refuse in one line what ``merge_run`` cannot merge, before anything is written; the run's adapter record."""
    if run.spec.train.adapters is None:
        raise TbuildError(f"{run.dir.path}: not an adapter run (its spec sets no train.adapters); nothing to merge")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise TbuildError(f"{out}: exists and is not an empty folder; merge into a new one")
    record = read_record(run.dir.path)
    if record is None:
        raise TbuildError(f"{run.dir.path}: no {BASE_FILE} (the reference to its base); has it been trained?")
    return record


def merge_run(run: Run, out: Path, *, checkpoint: Path | None = None) -> tuple[str, str]:
    """Write the merged run of ``run`` (an adapter run) into ``out`` (a new or empty folder); returns which
    adapter weights were merged and the tokenizer's file name in ``out``, for reports."""
    record = check_merge(run, out)
    path = weights_files(run, checkpoint=checkpoint)[0]
    tensors, meta = read_checkpoint(path)
    whole = folded(run.dir.path, tensors)
    tokenizer = run.tokenizer
    target = RunDir(out)
    out.mkdir(parents=True, exist_ok=True)
    train = run.spec.train.model_copy(update={"adapters": None, "init": None})
    target.write_spec(run.spec.model_copy(update={"train": train, "output_dir": str(out)}))
    copy = target.tokenizer_for(tokenizer)  # tokenizer.json stays a tokenizers file, not an spm.model
    shutil.copyfile(tokenizer, copy)
    if tokenizer.with_suffix(".vocab").is_file():
        shutil.copyfile(tokenizer.with_suffix(".vocab"), copy.with_suffix(".vocab"))
    if run.dir.lineage_file.is_file():  # where the run started from: kept with the merged run
        shutil.copyfile(run.dir.lineage_file, target.lineage_file)
    lora = adapters_of(record)
    save_weights(target.best, whole, {"architecture": run.spec.architecture_hash(), "step": meta.get("step", 0),
                                      "merged": {"adapters": str(path.resolve()), "base": record["base"]["run"],
                                                 "r": lora.r, "alpha": lora.alpha, "modules": len(lora.modules)}})
    return path.name, copy.name
