"""A family's weight map, declared once and read both ways: export writes tbuild's tensors under the Hugging
Face names, import reads them back (litgpt keeps one map per family the same way; tbuild's maps are data).

A ``Map`` is Hugging Face name -> ``Rule``; ``{i}`` in both names stands for a layer of the stack whose module
list the tbuild name starts with (``decoder.{i}.ffn.norm.weight``). A rule names the tbuild parameters written
into one Hugging Face tensor (several: fused on the output axis, in order, as GPT-2's ``c_attn`` is
W^Q|W^K|W^V), a ``Transform`` with its inverse (a transpose, a permutation of rows), and whether the tensor
may be absent on one side (``optional``: a bias one of them lacks, written or read as zeros)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

LAYER = "{i}"
State = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Transform:
    """A tensor's change from tbuild's layout to the Hugging Face class's (``out``) and back (``back``)."""

    out: Callable[[torch.Tensor], torch.Tensor]
    back: Callable[[torch.Tensor], torch.Tensor]


SAME = Transform(lambda t: t, lambda t: t)
TRANSPOSED = Transform(lambda t: t.t().contiguous(), lambda t: t.t().contiguous())  # Conv1D's (in, out)


def rows(order: torch.Tensor) -> Transform:
    """The rows in ``order`` (Hugging Face row j is tbuild's row order[j]) and back."""
    inverse = torch.argsort(order)
    return Transform(lambda t: t[order], lambda t: t[inverse])


@dataclass(frozen=True)
class Rule:
    """One Hugging Face tensor: the tbuild parameters fused into it (axis 0), how it is laid out, and whether
    either side may lack it (zeros then)."""

    ours: tuple[str, ...]
    transform: Transform = SAME
    optional: bool = False


Map = dict[str, Rule]


def rule(*ours: str, transform: Transform = SAME, optional: bool = False) -> Rule:
    return Rule(tuple(ours), transform, optional)


def linear(theirs: str, ours: str, *, transform: Transform = SAME, bias: bool = True) -> Map:
    """A linear layer's weight and (optional) bias; a bias takes the weight's row transform but not a transpose."""
    out = {f"{theirs}.weight": rule(f"{ours}.weight", transform=transform)}
    if bias:
        out[f"{theirs}.bias"] = rule(f"{ours}.bias", transform=SAME if transform is TRANSPOSED else transform,
                                     optional=True)
    return out


def norm(theirs: str, ours: str, bias: bool = True) -> Map:
    """A norm's weight and bias (RMSNorm: weight only)."""
    return {f"{theirs}.{p}": rule(f"{ours}.{p}") for p in (("weight", "bias") if bias else ("weight",))}


def expanded(names: Map, model: torch.nn.Module) -> Map:
    """``names`` with every ``{i}`` expanded to the layers of ``model``'s stack (the module list its tbuild
    names start with)."""
    out: Map = {}
    for theirs, r in names.items():
        layers = range(len(getattr(model, r.ours[0].split(".", 1)[0]))) if LAYER in theirs else [None]
        for i in layers:
            out[theirs if i is None else theirs.replace(LAYER, str(i))] = r if i is None else Rule(
                tuple(o.replace(LAYER, str(i)) for o in r.ours), r.transform, r.optional)
    return out


def to_hf(names: Map, ours: State, theirs: Mapping[str, torch.Size]) -> State:
    """The Hugging Face tensors of ``names`` from tbuild's ``ours`` (fused, transformed); ``theirs``: the
    class's parameter shapes (a name it lacks is skipped; a tensor tbuild lacks, optional, is zeros)."""
    out: State = {}
    for name, r in names.items():
        if name not in theirs:
            continue
        if all(o in ours for o in r.ours):
            out[name] = r.transform.out(torch.cat([ours[o] for o in r.ours]) if len(r.ours) > 1 else ours[r.ours[0]])
        elif r.optional:
            out[name] = torch.zeros(theirs[name])
        else:  # pragma: no cover - a map that names a parameter the model kind lacks
            raise KeyError(f"{name}: tbuild has none of {', '.join(r.ours)}")
    return out


def from_hf(names: Map, theirs: State, ours: Mapping[str, torch.Size]) -> State:
    """The inverse of ``to_hf``; ``ours``: the built model's parameter shapes, which say where a fused tensor
    splits (a parameter it lacks is skipped; one the folder lacks, optional, is zeros)."""
    out: State = {}
    for name, r in names.items():
        wanted = [o for o in r.ours if o in ours]
        if not wanted:
            continue
        if name not in theirs:
            if not r.optional:
                raise KeyError(f"{name}: missing from the folder's weights")
            out |= {o: torch.zeros(ours[o]) for o in wanted}
            continue
        parts = r.transform.back(theirs[name]).split([ours[o][0] for o in r.ours]) if len(r.ours) > 1 \
            else [r.transform.back(theirs[name])]
        out |= {o: p for o, p in zip(r.ours, parts, strict=True) if o in ours}
    return out
