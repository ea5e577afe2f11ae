"""An adapter run's reference to its base (``adapters.json``): the base run and weights files it trains on,
their checksum, and the adapters (``components/lora.py``). Its checkpoints hold the adapters' tensors
only; the model they stand for is the base's weights with each update folded in, W + (α/r) · B A, which
every command that loads a run's weights gets (``weights.load_weights``), as ``tbuild merge`` writes it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from tbuild.components.lora import Adapters, merged

from ..errors import TbuildError
from ..files import atomic_write
from .checkpoint import average_checkpoints, read_checkpoint

BASE_FILE = "adapters.json"


def checksum(tensors: dict[str, torch.Tensor]) -> str:
    """sha256 of the tensors' names, dtypes, shapes and bytes (in name order): the identity of a base's weights
    however they are stored."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        digest.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def base_record(run: Path, files: list[Path], average: bool, step: int, tensors: dict[str, torch.Tensor],
                adapters: Adapters, schedule_offset: int) -> dict[str, Any]:
    """What ``adapters.json`` holds: the base (its run, weights files, step and checksum) and the adapters."""
    return {"base": {"run": str(run.resolve()), "weights": [str(p.resolve()) for p in files], "average": average,
                     "step": step, "sha256": checksum(tensors)},
            "lora": {"r": adapters.r, "alpha": adapters.alpha, "dropout": adapters.dropout,
                     "modules": list(adapters.modules)},
            "schedule_offset": schedule_offset}


def write_record(run: Path, record: dict[str, Any]) -> None:
    atomic_write(run / BASE_FILE, (json.dumps(record, indent=1) + "\n").encode())


def read_record(run: Path) -> dict[str, Any] | None:
    """A run's ``adapters.json``, or None where it has none (not yet started, or not an adapter run)."""
    try:
        return json.loads((run / BASE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def adapters_of(record: dict[str, Any]) -> Adapters:
    lora = record["lora"]
    return Adapters(tuple(lora["modules"]), int(lora["r"]), float(lora["alpha"]), float(lora["dropout"]))


def base_tensors(record: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The base's tensors by parameter name, read again from its weights files; refused in one line where
    they are not the ones the adapters were trained on (the base trained further, replaced or removed)."""
    base = record["base"]
    files = [Path(p) for p in base["weights"]]
    missing = [str(p) for p in files if not p.is_file()]
    if missing:
        raise TbuildError(f"the adapters' base weights {missing[0]} are gone; the adapters need the model they "
                          f"were trained on (base run {base['run']})")
    tensors, _ = average_checkpoints(files) if base["average"] else read_checkpoint(files[0])
    model = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    if checksum(model) != base["sha256"]:
        raise TbuildError(f"the adapters' base {', '.join(map(str, files))} changed since they were trained on it "
                          f"(checksum {checksum(model)[:12]}, recorded {base['sha256'][:12]}); train the adapters "
                          "anew or restore that base")
    return model


def folded(run: Path, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """An adapter checkpoint's ``model.*`` tensors as the whole model's: the base's with the updates folded in."""
    record = read_record(run)
    if record is None:
        raise TbuildError(f"{run}: an adapter run without its {BASE_FILE} (the reference to its base); "
                          "has it been trained?")
    adapter = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    whole = merged(base_tensors(record), adapter, adapters_of(record))
    return {f"model.{k}": v for k, v in whole.items()}
