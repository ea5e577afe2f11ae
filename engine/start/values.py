"""Where a run's training begins besides the spec's own initialisation: tensors written into the built
model, parameters that do not train, Adam's moments of some parameters, and how many steps the
learning-rate schedule is ahead. An ordinary run begins with none of these (``Initial()``); a run that
starts from another one's model (``train.init``) is resolved into these values before training."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from torch import nn

from tbuild.components.lora import Adapters, adapter_names, attach


@dataclass(frozen=True)
class Patch:
    """A tensor to write into a parameter: whole, or into the given rows only (the rest keep their init)."""

    value: torch.Tensor
    rows: torch.Tensor | None = None


@dataclass(frozen=True)
class Initial:
    """Initial values of a run, by parameter name."""

    patches: Mapping[str, Patch] = field(default_factory=dict)
    frozen: frozenset[str] = frozenset()
    moments: Mapping[str, dict[str, torch.Tensor]] = field(default_factory=dict)  # optimizer state
    schedule_offset: int = 0
    adapters: Adapters | None = None  # low-rank adapters put on the model after the patches (the rest frozen)

    @torch.no_grad()
    def apply(self, model: nn.Module) -> None:
        """Write the patches into ``model`` (parameters, and buffers such as a character input's spelling
        table, ``spelling.py``), freeze the frozen parameters and put the adapters on it."""
        for name, buffer in model.named_buffers():
            if name in self.patches:
                buffer.copy_(self.patches[name].value)
        for name, param in model.named_parameters():
            patch = self.patches.get(name)
            if patch is not None and patch.rows is None:
                param.copy_(patch.value)
            elif patch is not None:
                param[patch.rows.to(param.device)] = patch.value.to(param)
            if name in self.frozen:
                param.requires_grad_(False)
        if self.adapters is not None:
            attach(model, self.adapters)

    @property
    def saved(self) -> frozenset[str] | None:
        """The parameter names a checkpoint holds: an adapter run's adapters only; None: all."""
        return adapter_names(self.adapters) if self.adapters is not None else None

    def load_moments(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        """Put the carried optimizer state of each trained parameter into ``optimizer``, placed as
        ``Optimizer.load_state_dict`` places it: the moments on the parameter's device; the step count
        there too (as float32) where the parameter's group is fused or capturable (a fused CUDA AdamW
        reads it on the GPU), else on the CPU."""
        on_device = {id(p) for g in optimizer.param_groups if g.get("fused") or g.get("capturable")
                     for p in g["params"]}
        for name, param in model.named_parameters():
            slots = self.moments.get(name)
            if slots is not None and param.requires_grad:
                optimizer.state[param] = {k: _placed(k, v, param, id(param) in on_device) for k, v in slots.items()}


def _placed(key: str, value: torch.Tensor, param: torch.Tensor, step_on_device: bool) -> torch.Tensor:
    """A copy of one optimizer state tensor where ``param``'s optimizer reads it."""
    if key != "step":
        return value.clone().to(param.device)
    return value.clone().to(param.device, torch.float32) if step_on_device else value.clone()
