"""Checkpoints of an FSDP2-sharded model in the usual single-file format: the shards of weights and
optimizer state are gathered into whole tensors (``torch.distributed.checkpoint.state_dict``), the
main process writes one step_N.safetensors that decode, evaluate and export load on one process, and
any number of processes (any sharding) resumes from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save as st_save
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from ..checkpoint import read_checkpoint
from ..errors import CheckpointError
from ..files import atomic_write

FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)  # whole tensors, on the CPU of rank 0 only


def _names(model: nn.Module) -> list[str]:
    """Parameter names in ``model.parameters()`` order, each shared (tied) parameter once: the index
    of a name is the optimizer-state index that a single-process checkpoint stores."""
    return [name for name, _ in model.named_parameters()]


def _first_names(model: nn.Module) -> set[str]:
    """Names of the state dict's entries without the aliases of tied weights."""
    return set(_names(model)) | {name for name, _ in model.named_buffers()}


def full_weights(model: nn.Module) -> dict[str, torch.Tensor]:
    """The whole model's tensors (tied ones once) on rank 0; empty on the others. A collective."""
    state = get_model_state_dict(model, options=FULL)
    keep = _first_names(model)
    return {k: v.contiguous() for k, v in state.items() if k in keep}


def save_checkpoint(path: Path, model: nn.Module, meta: dict[str, Any], optimizer: torch.optim.Optimizer,
                    *, write: bool) -> None:
    """Gather weights and optimizer state (a collective: every process calls it); the process with
    ``write`` stores them as one checkpoint, the same layout ``checkpoint.save_checkpoint`` writes."""
    weights = full_weights(model)
    optim = get_optimizer_state_dict(model, optimizer, options=FULL)
    if not write:
        return
    index = {name: i for i, name in enumerate(_names(model))}
    tensors = {f"model.{k}": v for k, v in weights.items()}
    for name, slots in optim["state"].items():
        for slot, value in slots.items():
            tensors[f"optim.{index[name]}.{slot}"] = torch.as_tensor(value).detach().cpu().contiguous()
    groups = [{**g, "params": [index[p] for p in g["params"]]} for g in optim["param_groups"]]
    tensors["rng.torch"] = torch.get_rng_state()
    atomic_write(path, st_save(tensors, metadata={"tbuild": json.dumps({**meta, "optim_groups": groups})}))


def load_into(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer,
              expect_hash: str | None = None) -> dict[str, Any]:
    """Load a single-file checkpoint (written by any number of processes) into a sharded model and its
    optimizer: every process reads the whole file and keeps its shards. Returns the metadata."""
    tensors, meta = read_checkpoint(path)
    if expect_hash is not None and meta.get("architecture") != expect_hash:
        raise CheckpointError(f"{path}: checkpoint is of another model (architecture {meta.get('architecture')}, "
                              f"spec has {expect_hash})")
    names = _names(model)
    weights = {k[6:]: v for k, v in tensors.items() if k.startswith("model.")}
    missing = _first_names(model) - set(weights)
    if missing or set(weights) - _first_names(model):
        raise CheckpointError(f"{path}: weights do not fit the model (missing {sorted(missing)[:3]})")
    set_model_state_dict(model, weights, options=StateDictOptions(full_state_dict=True, strict=False))
    state: dict[str, dict[str, torch.Tensor]] = {}
    for k, v in tensors.items():
        if k.startswith("optim."):
            _, idx, slot = k.split(".", 2)
            state.setdefault(names[int(idx)], {})[slot] = v
    groups = [{**g, "params": [names[i] for i in g["params"]]} for g in meta["optim_groups"]]
    set_optimizer_state_dict(model, optimizer, {"state": state, "param_groups": groups},
                             options=StateDictOptions(full_state_dict=True))
    torch.set_rng_state(tensors["rng.torch"])
    return meta
