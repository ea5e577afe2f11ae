"""Checkpoints of an FSDP2-sharded model. Resume goes through ``torch.distributed.checkpoint`` (DCP):
at step N every process writes its own shards of weights and optimizer state as safetensors into
``step_N.dcp.tmp/`` (``HuggingFaceStorageWriter``), the main process adds ``tbuild.json`` (the
TrainState meta, how it was written, each shard file's size) and renames the directory to
``step_N.dcp/``; beside it, the gathered weights alone go to ``step_N.safetensors``, the file decode,
evaluate, export and average load on one process. Any number of processes (any sharding, or none:
one process without a process group) resumes from the directory; DCP reshards. Nothing is unpickled:
``HuggingFaceStorageReader`` builds DCP's metadata from the safetensors headers (no ``.metadata``
pickle), and only tensors are stored (param_groups are rebuilt from the spec; lr is set every step).

A whole single-file checkpoint (one process or DDP) also loads into a sharded model (``load_into``)."""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from safetensors import SafetensorError
from torch import nn
from torch.distributed.checkpoint import CheckpointException
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.tensor import DTensor, distribute_tensor

from ..errors import CheckpointError
from ..files import atomic_write
from ..run.checkpoint import read_checkpoint, save_weights

META = "tbuild.json"  # in a sharded checkpoint directory, beside the shards
TMP_SUFFIX = ".tmp"  # step_N.dcp.tmp: being written; renamed to step_N.dcp once whole
SHARD_SUFFIX = ".safetensors"
FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)  # whole tensors, on the CPU of rank 0 only
# DCP's safetensors storage with every rank writing its own shards (HuggingFaceStorageWriter(save_distributed=...))
MIN_TORCH = "2.9"


def require_torch() -> None:
    """Refuse, in one line, a torch too old for sharded checkpoints (the rest of tbuild runs on older)."""
    if torch.__version__ < MIN_TORCH:
        raise CheckpointError(f"sharded (FSDP) checkpoints need torch >= {MIN_TORCH}, this is torch "
                              f"{torch.__version__}: upgrade torch, or train with distributed.strategy: ddp")


def _hf_storage() -> ModuleType:
    """``torch.distributed.checkpoint.hf_storage``, imported when a sharded checkpoint is saved or loaded."""
    require_torch()
    from torch.distributed.checkpoint import hf_storage

    return hf_storage


def _names(model: nn.Module) -> list[str]:
    """Parameter names in ``model.parameters()`` order, each shared (tied) parameter once: the index
    of a name is the optimizer-state index that a single-process checkpoint stores."""
    return [name for name, _ in model.named_parameters()]


def _first_names(model: nn.Module) -> set[str]:
    """Names of the state dict's entries without the aliases of tied weights: the parameters (each
    once) and the persistent buffers (non-persistent ones, e.g. sinusoid tables, are not saved)."""
    every_param = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    return set(_names(model)) | {name for name in model.state_dict() if name not in every_param}


def full_weights(model: nn.Module) -> dict[str, torch.Tensor]:
    """The whole model's tensors (tied ones once) on rank 0; empty on the others. A collective."""
    state = get_model_state_dict(model, options=FULL)
    keep = _first_names(model)
    return {k: v.contiguous() for k, v in state.items() if k in keep}


def _barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def _tensor_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict[str, Any], list[Any]]:
    """What DCP stores and loads: this process's shards (DTensors) of the weights and of the optimizer
    state (tensors only), keyed by parameter name; and the optimizer's param_groups, kept out of it."""
    optim = get_optimizer_state_dict(model, optimizer)  # initialises a fresh optimizer's state
    for name, slots in optim["state"].items():
        for slot, value in slots.items():
            if not isinstance(value, torch.Tensor):
                raise CheckpointError(f"optimizer state {name}.{slot} is not a tensor; sharded checkpoints "
                                      "store tensors only")
    keep = _first_names(model)  # tied weights once (safetensors refuses aliases)
    weights = {k: v for k, v in get_model_state_dict(model).items() if k in keep}
    return {"model": weights, "optim": optim["state"]}, optim["param_groups"]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(folder: Path, weights_file: Path, model: nn.Module, meta: dict[str, Any],
                    optimizer: torch.optim.Optimizer, *, write: bool) -> None:
    """Write the sharded checkpoint ``folder`` (``step_N.dcp``) and the weights-only ``weights_file``.
    A collective: every process calls it and writes its own shard; the process with ``write`` (the
    main one) clears stale temporary directories, writes the meta and renames ``folder`` into place."""
    tmp = folder.with_name(folder.name + TMP_SUFFIX)
    if write:
        for stale in folder.parent.glob(f"*.dcp{TMP_SUFFIX}"):  # a killed save's leftovers
            shutil.rmtree(stale)
        tmp.mkdir(parents=True)
    _barrier()  # the directory exists (and no stale one is being removed) before anyone writes
    state, _ = _tensor_state(model, optimizer)
    # Returns once every process's shard is written and fsynced (DCP gathers their write results).
    dcp.save(state, storage_writer=_hf_storage().HuggingFaceStorageWriter(str(tmp), save_distributed=True))
    weights = full_weights(model)  # a collective as well
    if not write:
        return
    shards = {p.name: p.stat().st_size for p in sorted(tmp.glob(f"*{SHARD_SUFFIX}"))}
    rng = torch.get_rng_state().numpy().tobytes().hex()
    info = {**meta, "strategy": "fsdp", "world": dist.get_world_size() if dist.is_initialized() else 1,
            "shards": shards, "rng_torch": rng}
    atomic_write(tmp / META, json.dumps(info).encode())
    if folder.exists():  # a step saved again after falling back from its unreadable checkpoint
        shutil.rmtree(folder)
    os.replace(tmp, folder)
    _fsync_dir(folder.parent)
    save_weights(weights_file, {f"model.{k}": v for k, v in weights.items()},
                 {"architecture": meta.get("architecture"), "step": meta.get("step"), "kind": "weights",
                  "resume_from": folder.name})


def read_meta(folder: Path, expect_hash: str | None = None) -> dict[str, Any]:
    """The meta of the sharded checkpoint ``folder``, after checking that it is whole: its meta file is
    there and every shard it lists has the size written (a CheckpointError otherwise)."""
    try:
        meta = json.loads((folder / META).read_text())
        shards: dict[str, int] = dict(meta["shards"].items())  # file name -> bytes written
        bytes.fromhex(meta["rng_torch"])  # checked here; set by load_sharded
        sizes = {name: (folder / name).stat().st_size for name in shards}
        present = {p.name for p in folder.glob(f"*{SHARD_SUFFIX}")}
    except FileNotFoundError as e:
        missing = Path(e.filename or "").name
        raise CheckpointError(f"{folder}: incomplete sharded checkpoint ({missing} missing)") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise CheckpointError(f"{folder}: not a readable sharded checkpoint ({type(e).__name__}: {e})") from None
    wrong = sorted(name for name, size in shards.items() if sizes[name] != size) + sorted(present - set(shards))
    if wrong:
        raise CheckpointError(f"{folder}: shard files truncated, changed or unexpected: {', '.join(wrong[:3])}")
    if expect_hash is not None and meta.get("architecture") != expect_hash:
        raise CheckpointError(f"{folder}: checkpoint is of another model (architecture {meta.get('architecture')}, "
                              f"spec has {expect_hash})")
    return meta


def load_sharded(folder: Path, model: nn.Module, optimizer: torch.optim.Optimizer,
                 expect_hash: str | None = None) -> dict[str, Any]:
    """Load the sharded checkpoint ``folder`` into ``model`` and ``optimizer``: sharded by FSDP2 over
    any number of processes (DCP reads the parts of the saved shards each one needs), or whole on one
    process without a process group. Restores the torch RNG; returns the meta."""
    meta = read_meta(folder, expect_hash)
    state, groups = _tensor_state(model, optimizer)
    try:
        with warnings.catch_warnings():  # one process without a process group is meant, not an accident
            warnings.filterwarnings("ignore", message="torch.distributed is disabled")
            dcp.load(state, storage_reader=_hf_storage().HuggingFaceStorageReader(str(folder)),
                     no_dist=not dist.is_initialized())
    except (CheckpointException, SafetensorError, OSError, RuntimeError, ValueError, KeyError, AssertionError) as e:
        first = (str(e).strip().splitlines() or [""])[0][:200]
        raise CheckpointError(f"{folder}: sharded checkpoint does not load ({type(e).__name__}: {first})") from None
    set_model_state_dict(model, state["model"], options=StateDictOptions(strict=False))  # aliases share
    set_optimizer_state_dict(model, optimizer, {"state": state["optim"], "param_groups": groups})
    torch.set_rng_state(torch.frombuffer(bytearray(bytes.fromhex(meta["rng_torch"])), dtype=torch.uint8))
    return meta


def _like(full: torch.Tensor, local: torch.Tensor) -> torch.Tensor:
    """``full`` laid out as ``local``: this process's shard of it where ``local`` is a DTensor (cut
    here from the whole tensor every process has read: no communication), else the whole tensor."""
    if isinstance(local, DTensor):
        return distribute_tensor(full.to(local.device, local.dtype), local.device_mesh, local.placements,
                                 src_data_rank=None)
    return full.to(local.device)


def load_into(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer,
              expect_hash: str | None = None) -> dict[str, Any]:
    """Load a single-file checkpoint (one process or DDP) into a sharded model and its optimizer:
    every process reads the whole file and keeps its shards. Returns the metadata."""
    tensors, meta = read_checkpoint(path)
    if expect_hash is not None and meta.get("architecture") != expect_hash:
        raise CheckpointError(f"{path}: checkpoint is of another model (architecture {meta.get('architecture')}, "
                              f"spec has {expect_hash})")
    if "optim_groups" not in meta:
        raise CheckpointError(f"{path}: weights only (no optimizer state to resume from)")
    names = _names(model)
    weights = {k[6:]: v for k, v in tensors.items() if k.startswith("model.")}
    missing = _first_names(model) - set(weights)
    if missing or set(weights) - _first_names(model):
        raise CheckpointError(f"{path}: weights do not fit the model (missing {sorted(missing)[:3]})")
    local, _ = _tensor_state(model, optimizer)
    state: dict[str, dict[str, torch.Tensor]] = {}
    try:
        for k, v in tensors.items():
            if k.startswith("optim."):
                _, idx, slot = k.split(".", 2)
                state.setdefault(names[int(idx)], {})[slot] = _like(v, local["optim"][names[int(idx)]][slot])
        weights = {k: _like(v, local["model"][k]) for k, v in weights.items()}
    except (KeyError, IndexError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"{path}: optimizer state does not fit the model ({type(e).__name__}: {e})") from None
    set_model_state_dict(model, weights, options=StateDictOptions(strict=False))  # tied aliases share
    groups = get_optimizer_state_dict(model, optimizer)["param_groups"]  # from the spec; lr is set every step
    set_optimizer_state_dict(model, optimizer, {"state": state, "param_groups": groups})
    torch.set_rng_state(tensors["rng.torch"])
    return meta
