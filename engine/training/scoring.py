"""Validation's decoded score on every process (``train.select``): the task's scorer (``Task.valid_scorer``,
``tasks/validation.py``) decodes each process's share of the validation lines, and every process scores all
of them, gathered: the same outputs, the same score everywhere. Under FSDP2 the main process decodes them
all with a plain model holding the gathered weights (``whole_model``)."""

from __future__ import annotations

import torch
from torch import nn

from tbuild.builder import build_model
from tbuild.builder.spec import Spec

from ..run.checkpoint import load_model_weights
from ..tasks.base import Scorer
from . import distributed
from .distributed import Rank


def scored(scorer: Scorer, model: nn.Module | None, rank: Rank, *, whole: bool = False) -> float:
    """The score of all of ``scorer``'s lines: each rank decodes every world-th line from its own index with
    ``model`` (``whole``: the main rank decodes all of them, the others none and may pass no model), and every
    rank scores the gathered outputs."""
    n = len(scorer.sources)
    share = (list(range(n)) if rank.is_main else []) if whole else list(range(rank.index, n, rank.world))
    outputs = scorer.decode(model, share) if share and model is not None else []  # a rank with a share has a model
    texts = [""] * n
    for indices, decoded in distributed.gather_objects(rank, (share, outputs)):
        for i, text in zip(indices, decoded, strict=True):
            texts[i] = text
    return scorer.score(texts)


def whole_model(spec: Spec, weights: dict[str, torch.Tensor], device: torch.device) -> nn.Module:
    """A plain (unsharded) model holding ``weights`` (an FSDP2 model's, gathered) on ``device``; built
    with the torch RNG forked, so that validating draws no random numbers training would have drawn."""
    with torch.random.fork_rng(devices=[]):
        model = build_model(spec)
    load_model_weights(model, {f"model.{k}": v for k, v in weights.items()}, "the gathered weights")
    return model.to(device)
