"""Checkpoints: one safetensors file (model, optimizer, RNG tensors) with JSON metadata.

Nothing is unpickled on load. Files are written atomically (temp file, fsync, rename, fsync dir), so
a run killed at any moment leaves only whole checkpoints behind.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save
from torch import nn

from ..errors import CheckpointError
from ..files import atomic_write


def model_tensors(model: nn.Module) -> dict[str, torch.Tensor]:
    """The state dict with each shared (tied) tensor stored once, under its first name."""
    seen: dict[int, str] = {}
    out: dict[str, torch.Tensor] = {}
    for name, t in model.state_dict().items():
        key = t.data_ptr()
        if key in seen and t.numel() > 0:
            continue
        seen[key] = name
        out[name] = t.detach().cpu().contiguous()
    return out


def save_checkpoint(path: Path, model: nn.Module, meta: dict[str, Any],
                    optimizer: torch.optim.Optimizer | None = None, only: Collection[str] | None = None) -> None:
    """Save weights (+ optimizer state and RNG states when given) and JSON metadata atomically; ``only``:
    the model's tensors saved (an adapter run's), else all."""
    tensors = {f"model.{k}": v for k, v in model_tensors(model).items() if only is None or k in only}
    meta = dict(meta)
    if optimizer is not None:
        state = optimizer.state_dict()
        for idx, slots in state["state"].items():
            for name, value in slots.items():
                tensors[f"optim.{idx}.{name}"] = value.detach().cpu().contiguous()
        meta["optim_groups"] = state["param_groups"]
        tensors["rng.torch"] = torch.get_rng_state()
        if torch.cuda.is_available():
            for i, s in enumerate(torch.cuda.get_rng_state_all()):
                tensors[f"rng.cuda.{i}"] = s
    atomic_write(path, st_save(tensors, metadata={"tbuild": json.dumps(meta)}))


def read_checkpoint(path: Path, *, model_only: bool = False) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Tensors and metadata of a checkpoint file, or a CheckpointError naming the file. ``model_only``: the
    ``model.*`` tensors alone, read from the file without the optimizer's (a third of a training checkpoint)."""
    if model_only:
        return _read_model(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CheckpointError(f"{path}: checkpoint not found") from None
    try:
        tensors = st_load(data)
        header_len = int.from_bytes(data[:8], "little")
        header = json.loads(data[8:8 + header_len])
        meta = json.loads(header["__metadata__"]["tbuild"])
    except (SafetensorError, ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{path}: not a readable tbuild checkpoint (truncated or corrupt: {e})") from None
    return tensors, meta


def _read_model(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint not found")
    try:
        with safe_open(path, framework="pt") as f:
            meta = json.loads((f.metadata() or {})["tbuild"])
            tensors = {k: f.get_tensor(k) for k in f.keys() if k.startswith("model.")}  # noqa: SIM118 - a file
    except (SafetensorError, OSError, ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{path}: not a readable tbuild checkpoint (truncated or corrupt: {e})") from None
    return tensors, meta


def load_into(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer | None = None,
              expect_hash: str | None = None, only: Collection[str] | None = None) -> dict[str, Any]:
    """Load a checkpoint into ``model`` (and ``optimizer``, restoring RNG states); returns its metadata.
    ``only``: the model's tensors the checkpoint holds (``save_checkpoint``'s), else all."""
    tensors, meta = read_checkpoint(path)
    if expect_hash is not None and meta.get("architecture") != expect_hash:
        raise CheckpointError(f"{path}: checkpoint is of another model (architecture {meta.get('architecture')}, "
                              f"spec has {expect_hash})")
    if optimizer is not None and "optim_groups" not in meta:
        raise CheckpointError(f"{path}: weights only (no optimizer state to resume from)")
    load_model_weights(model, tensors, path, only)
    if optimizer is not None:
        state: dict[int, dict[str, torch.Tensor]] = {}
        for k, v in tensors.items():
            if k.startswith("optim."):
                _, idx, name = k.split(".", 2)
                state.setdefault(int(idx), {})[name] = v
        optimizer.load_state_dict({"state": state, "param_groups": meta["optim_groups"]})
        torch.set_rng_state(tensors["rng.torch"])
        if torch.cuda.is_available():
            torch.cuda.set_rng_state_all([tensors[k] for k in sorted(t for t in tensors if t.startswith("rng.cuda."))])
    return meta


def load_model_weights(model: nn.Module, tensors: dict[str, torch.Tensor], source: Path | str,
                       only: Collection[str] | None = None) -> None:
    """Copy the ``model.*`` tensors into ``model``; every weight (of ``only``, where given) must be there and
    nothing else (tied weights are stored once, under their first name)."""
    weights = {k[6:]: v for k, v in tensors.items() if k.startswith("model.")}
    missing, unexpected = model.load_state_dict(weights, strict=False)
    aliases = set(model.state_dict()) - set(model_tensors(model))
    if only is not None:
        aliases |= set(model.state_dict()) - set(only)
    if unexpected or set(missing) - aliases:
        raise CheckpointError(f"{source}: weights do not fit the model (missing {sorted(set(missing) - aliases)[:3]}, "
                              f"unexpected {sorted(unexpected)[:3]})")


def average_checkpoints(paths: list[Path]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Element-wise mean of the weights of ``paths`` (§6.1); refuses checkpoints of different models."""
    if not paths:
        raise CheckpointError("no checkpoints to average")
    total: dict[str, torch.Tensor] = {}
    first_meta: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    for path in paths:
        tensors, meta = read_checkpoint(path, model_only=True)
        if not first_meta:
            first_meta = meta
        elif meta.get("architecture") != first_meta.get("architecture"):
            raise CheckpointError(f"{path}: spec hash {meta.get('architecture')} differs from "
                                  f"{paths[0].name}'s {first_meta.get('architecture')}; refusing to average")
        for k, v in tensors.items():
            if k.startswith("model."):
                total[k] = total[k] + v.double() if k in total else v.double()
    averaged = {k: (v / len(paths)).to(torch.float32) for k, v in total.items()}
    out = {"architecture": first_meta.get("architecture")}
    out.update(averaged_from=[p.name for p in paths], step=meta.get("step", 0))
    return averaged, out


def save_weights(path: Path, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    atomic_write(path, st_save({k: v.contiguous() for k, v in tensors.items()}, metadata={"tbuild": json.dumps(meta)}))
