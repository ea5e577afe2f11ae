"""Training on many processes with PyTorch's own engine (torch.distributed, started by torchrun):
which process this is, the process group, the DDP / FSDP2 wrapper, and the few collectives the
trainer needs (token counts, agreed stops, barriers).

A process started by torchrun finds RANK, LOCAL_RANK and WORLD_SIZE in its environment; a process
started any other way is rank 0 of 1 and never touches torch.distributed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

import torch
import torch.distributed as dist
from torch import nn

from tbuild.components.weights import weight_tree

from ..errors import TbuildError

Strategy = Literal["ddp", "fsdp"]
# A collective that waits longer than this for a peer fails (and torchrun ends the job): a dead or
# stuck rank ends the job in bounded time instead of leaving the others hanging.
TIMEOUT_ENV = "TBUILD_DIST_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 600


@dataclass(frozen=True)
class Rank:
    """This process among the training processes; only the main one writes into the run directory."""

    index: int = 0
    world: int = 1
    local: int = 0  # index on this machine: the CUDA device it uses
    local_world: int = 1  # processes on this machine (torchrun's LOCAL_WORLD_SIZE)

    @property
    def is_main(self) -> bool:
        return self.index == 0

    @property
    def distributed(self) -> bool:
        return self.world > 1


def rank_from_env() -> Rank:
    """The rank torchrun gave this process (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), else rank 0
    of 1."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        index, local = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    except ValueError as e:
        raise TbuildError(f"torchrun environment: {e}") from None
    if not 0 <= index < world:
        raise TbuildError(f"RANK {index} is not in 0..{world - 1} (WORLD_SIZE {world})")
    return Rank(index, world, local, local_world)


def check_gpus(processes: int, device: torch.device) -> None:
    """Refuse more training processes on this machine than it has GPUs: NCCL takes one GPU per process,
    and two ranks on one GPU fail or hang."""
    gpus = torch.cuda.device_count()
    if device.type == "cuda" and processes > gpus:
        raise TbuildError(f"{processes} training processes on this machine but {gpus} GPU(s): NCCL needs one GPU "
                          f"per process (--nproc {gpus}, or --device cpu to train on gloo)")


def init(rank: Rank, device: torch.device) -> torch.device:
    """Join the process group (gloo on CPU, nccl on CUDA, one device per local rank); returns the
    device this rank computes on. Nothing to do for a single process."""
    if device.type == "cuda":
        check_gpus(rank.local_world, device)
        device = torch.device("cuda", rank.local)
        torch.cuda.set_device(device)
    if not rank.distributed or dist.is_initialized():
        return device
    timeout = timedelta(seconds=float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)))
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, timeout=timeout, device_id=device if device.type == "cuda" else None)
    return device


def shutdown() -> None:
    """Leave the process group (if this process joined one)."""
    if dist.is_initialized():
        dist.destroy_process_group()


def barrier(rank: Rank) -> None:
    if rank.distributed:
        dist.barrier()


def all_sum(rank: Rank, values: list[float], device: torch.device) -> list[float]:
    """The element-wise sum of ``values`` over all ranks (float64; one small collective)."""
    if not rank.distributed:
        return values
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.tolist()


def sum_tensors(rank: Rank, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The sums of same-shaped scalar ``tensors`` over all ranks, left on the device (no host sync)."""
    if not rank.distributed:
        return tensors
    stacked = torch.stack(tensors)
    dist.all_reduce(stacked, op=dist.ReduceOp.SUM)
    return tuple(stacked.unbind())


def any_rank(rank: Rank, flags: list[bool], device: torch.device) -> list[bool]:
    """Element-wise: is the flag set on any rank? Every rank gets the same answer, so all stop (or
    checkpoint) at the same step and none is left waiting in a collective."""
    if not rank.distributed:
        return flags
    return [v > 0 for v in all_sum(rank, [float(f) for f in flags], device)]


def from_main(rank: Rank, value: float, device: torch.device) -> float:
    """The main process's ``value`` on every rank (one small collective), so that a decision taken on it
    (the best weights, an early stop) is the same everywhere however the ranks' own values differ."""
    if not rank.distributed:
        return value
    return all_sum(rank, [value if rank.is_main else 0.0], device)[0]


def gather_objects(rank: Rank, value: Any) -> list[Any]:
    """Every rank's (picklable) ``value``, in rank order, on every rank."""
    if not rank.distributed:
        return [value]
    out: list[Any] = [None] * rank.world
    dist.all_gather_object(out, value)
    return out


def wrap(model: nn.Module, strategy: Strategy, rank: Rank, device: torch.device) -> nn.Module:
    """What the training steps run: ``model`` itself on one process; DDP (replicated weights,
    all-reduced gradients) or FSDP2 (parameters, gradients and optimizer state sharded over the ranks;
    ``fully_shard`` changes ``model`` in place, so it stays the module that is saved) on several."""
    if not rank.distributed:
        return model
    if strategy == "ddp":
        ids = [device.index] if device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(model, device_ids=ids)
    from torch.distributed.fsdp import fully_shard

    # One FSDP unit per layer (its weights are gathered just before use), the root holds the rest:
    # embeddings, the output projection and norms, so tied weights stay in one unit (§3.4).
    for stack in weight_tree(model).stacks:  # the model kind's stacks (components/weights.py)
        for layer in getattr(model, stack.layers):
            fully_shard(layer)
    fully_shard(model)
    return model


@contextmanager
def accumulating(module: nn.Module, last: bool) -> Iterator[None]:
    """Around one micro-batch's backward: gradients are reduced over the ranks only on the last
    micro-batch of an update (DDP ``no_sync``; FSDP2 ``set_requires_gradient_sync``)."""
    if isinstance(module, nn.parallel.DistributedDataParallel):
        with nullcontext() if last else module.no_sync():
            yield
        return
    sync = getattr(module, "set_requires_gradient_sync", None)
    if sync is not None:
        sync(last)
    yield


def is_sharded(module: nn.Module) -> bool:
    """Whether ``module`` was sharded by FSDP2 (its state dicts hold DTensors)."""
    return hasattr(module, "set_requires_gradient_sync")


def gradient_scale(rank: Rank) -> float:
    """DDP and FSDP2 average gradients over the ranks; the trainer's loss is already normalised by
    the global token count, so it is multiplied by the world size to get the gradient of the sum."""
    return float(rank.world)


def check_update_freq(update_freq: int, world: int) -> None:
    """update_freq counts the batches of one update over all processes: each takes update_freq / world."""
    if update_freq % world:
        raise TbuildError(f"train.update_freq ({update_freq}) must be a multiple of the number of processes "
                          f"({world}): it counts the batches of one update over all processes; "
                          f"set --set train.update_freq={world * update_freq}")


def launcher(nproc: int, args: list[str], *, nnodes: str | None = None, rdzv: str | None = None) -> list[str]:
    """The torchrun command that runs ``tbuild ARGS`` on ``nproc`` processes per machine."""
    import sys

    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc)]
    if nnodes is not None:
        cmd += ["--nnodes", nnodes]
    if rdzv is not None:
        cmd += ["--rdzv-backend", "c10d", "--rdzv-endpoint", rdzv]
    return [*cmd, "-m", "tbuild.cli", *args]

