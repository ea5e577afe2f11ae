"""An adapter run's adapters in ``peft``'s files (``adapter_config.json`` + ``adapter_model.safetensors``), for
the Hugging Face model its base exports to: each adapted module by its HF name (the family's map of the class
the export check chooses, ``engine/hf``), the tensors as ``base_model.model.<module>.lora_A.weight``."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save as st_save

from tbuild.builder import build_model
from tbuild.builder.resolved import resolve

from ..errors import TbuildError
from ..files import atomic_write
from ..hf.families import EXPORTS
from ..run.adapters import adapters_of, read_record
from ..run.checkpoint import read_checkpoint
from ..run.directory import Run
from ..run.weights import weights_files


def hf_modules(run: Run, modules: tuple[str, ...]) -> dict[str, str]:
    """Each adapted module's HF module name (refused where it has no HF weight of its own, or the run no class)."""
    from .targets import export_class

    def refuse(what: str) -> None:
        raise TbuildError(f"--peft: {run.spec.model.called} has no Hugging Face class: {what}")

    spec = run.spec
    key = export_class(spec, resolve(spec.model), "hf", refuse)
    with torch.device("meta"):
        model = build_model(spec)
    names = EXPORTS[key].names(spec, model, EXPORTS[key].exports[key])
    theirs = {r.ours[0]: hf for hf, r in names.items() if len(r.ours) == 1 and hf.endswith(".weight")}
    missing = [m for m in modules if f"{m}.weight" not in theirs]
    if missing:
        raise TbuildError(f"--peft: {missing[0]} has no weight of its own in the Hugging Face model")
    return {m: theirs[f"{m}.weight"].removesuffix(".weight") for m in modules}


def write_peft(run: Run, out: Path, task_type: str | None, *, checkpoint: Path | None = None) -> int:
    """Write the run's adapters into ``out`` in peft's format (``task_type``: ``Task.peft_type``); returns how many
    modules were written."""
    record = read_record(run.dir.path)
    if run.spec.train.adapters is None or record is None:
        raise TbuildError(f"{run.dir.path}: not a trained adapter run (no train.adapters or adapters.json)")
    adapters = adapters_of(record)
    hf = hf_modules(run, adapters.modules)
    tensors, _ = read_checkpoint(weights_files(run, checkpoint=checkpoint)[0])
    saved = {f"base_model.model.{hf[m]}.{part}.weight": tensors[f"model.{m}.{part}.weight"].contiguous()
             for m in adapters.modules for part in ("lora_A", "lora_B")}
    config = {"peft_type": "LORA", "task_type": task_type, "r": adapters.r,
              "lora_alpha": adapters.alpha, "lora_dropout": adapters.dropout, "bias": "none",
              "target_modules": sorted(hf.values()), "fan_in_fan_out": False, "inference_mode": True,
              "base_model_name_or_path": record["base"]["run"], "init_lora_weights": True}
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "adapter_model.safetensors", st_save(saved, metadata={"format": "pt"}))
    atomic_write(out / "adapter_config.json", (json.dumps(config, indent=1) + "\n").encode())
    return len(hf)
