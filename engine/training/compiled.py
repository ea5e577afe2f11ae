"""torch.compile of the training model (``train.compile``)."""

from __future__ import annotations

import torch
from torch import nn


def compile_model(model: nn.Module, *, backend: str = "inductor") -> nn.Module:
    """The model compiled once for every batch shape: ``dynamic=True`` traces batch and lengths as
    symbols, so a new (B, S, T) reuses the graph instead of recompiling (with static shapes every
    new batch shape compiled again: 4x slower on an H100, issue #13); guards on size relations (e.g.
    S == T, a length of 1) add at most a few graphs. The caller keeps ``model`` for checkpoints: the
    compiled wrapper's parameter names carry an ``_orig_mod.`` prefix."""
    return torch.compile(model, dynamic=True, backend=backend)
