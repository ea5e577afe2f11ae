"""Low-rank adapters (LoRA, Hu et al. 2021): a frozen linear map W plus a trained low-rank update,
y = W x + (α/r) · B A dropout(x), A (r × in) and B (out × r). B starts at zero, so an adapted model
computes exactly what its base does until the first update (§4.1). Names and scaling follow ``peft``'s
LoRA layers (``lora_A``, ``lora_B``, scaling α/r), so the adapter tensors map one to one onto its files.

``LoRALinear`` is an ``nn.Linear`` that keeps the base layer's own ``weight`` and ``bias`` (same names,
same tensors), so the base's checkpoint loads into an adapted model by name and the adapted model's
tensors are the base's plus the ``lora_A``/``lora_B`` ones."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fnmatch import fnmatch

import torch
from torch import nn

from .attention import AttentionBlock
from .dropout import Dropout
from .feedforward import SwiGLUFFN, _TwoLayerFFN

GROUPS = ("attention", "ffn")  # named targets: every projection of the attention blocks, of the feed-forward blocks
ADAPTER_PARTS = ("lora_A", "lora_B")


@dataclass(frozen=True)
class Adapters:
    """Where and how a model is adapted: the adapted linear modules (by module name), rank, α, dropout."""

    modules: tuple[str, ...]
    r: int
    alpha: float
    dropout: float

    @property
    def scaling(self) -> float:
        """α/r (§4.1), peft's ``scaling``."""
        return self.alpha / self.r


class LoRALinear(nn.Linear):
    """A base ``nn.Linear`` (its weight and bias, shared) with a low-rank update beside it."""

    def __init__(self, base: nn.Linear, r: int, alpha: float, dropout: float) -> None:
        nn.Module.__init__(self)
        self.in_features, self.out_features = base.in_features, base.out_features
        self.weight, self.bias = base.weight, base.bias
        self.r, self.scaling = r, alpha / r
        factory = {"device": base.weight.device, "dtype": base.weight.dtype}
        self.lora_A = nn.Linear(base.in_features, r, bias=False, **factory)
        self.lora_B = nn.Linear(r, base.out_features, bias=False, **factory)
        self.lora_dropout = Dropout(dropout)
        self.reset_adapter()

    @torch.no_grad()
    def reset_adapter(self) -> None:
        """A as ``nn.Linear``'s default (Kaiming-uniform, a=√5: peft's default), B zeros (§4.1)."""
        nn.init.kaiming_uniform_(self.lora_A.weight, a=math.sqrt(5))
        nn.init.zeros_(self.lora_B.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) + self.lora_B(self.lora_A(self.lora_dropout(x))) * self.scaling

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, r={self.r}, scaling={self.scaling:g}"


def adaptable(model: nn.Module) -> dict[str, set[str]]:
    """The linear modules adapters may target (those of the attention and feed-forward blocks), by module
    name, each with the groups it belongs to."""
    out: dict[str, set[str]] = {}
    for name, parent in model.named_modules():
        group = "attention" if isinstance(parent, AttentionBlock) else \
            "ffn" if isinstance(parent, _TwoLayerFFN | SwiGLUFFN) else None
        if group is None:
            continue
        for child, module in parent.named_children():
            if isinstance(module, nn.Linear):
                out[f"{name}.{child}" if name else child] = {group}
    return out


def match_targets(model: nn.Module, targets: list[str]) -> tuple[str, ...]:
    """The module names ``targets`` name: a group (``attention``, ``ffn``) or a module-name pattern
    (fnmatch: ``encoder.*.self_attn.sublayer.w_q``, ``*.w_v``); a ValueError naming a target that
    matches no adaptable module, with an example of the names there are."""
    candidates = adaptable(model)
    chosen: list[str] = []
    for target in targets:
        found = [n for n, groups in candidates.items() if target in groups or fnmatch(n, target)]
        if not found:
            example = next(iter(candidates), "none")
            raise ValueError(f"{target!r} matches no linear module of this model's attention or feed-forward "
                             f"blocks (names like {example}; groups: {', '.join(GROUPS)})")
        chosen += [n for n in found if n not in chosen]
    return tuple(n for n in candidates if n in chosen)  # the model's order


def attach(model: nn.Module, adapters: Adapters) -> None:
    """Replace each adapted linear module of ``model`` with a ``LoRALinear`` around it (in place)."""
    for name in adapters.modules:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        base = getattr(parent, child)
        if not isinstance(base, LoRALinear):
            setattr(parent, child, LoRALinear(base, adapters.r, adapters.alpha, adapters.dropout))


def adapter_names(adapters: Adapters) -> frozenset[str]:
    """The parameter names of the adapters' tensors (``….w_q.lora_A.weight``)."""
    return frozenset(f"{m}.{part}.weight" for m in adapters.modules for part in ADAPTER_PARTS)


def merged(base: dict[str, torch.Tensor], adapter: dict[str, torch.Tensor], adapters: Adapters
           ) -> dict[str, torch.Tensor]:
    """The base's tensors with each adapted weight W replaced by W + (α/r) · B A (computed in float64,
    stored in W's dtype): the plain model that computes what the adapted one does (without dropout)."""
    out = dict(base)
    for m in adapters.modules:
        a, b = adapter[f"{m}.lora_A.weight"].double(), adapter[f"{m}.lora_B.weight"].double()
        w = base[f"{m}.weight"]
        out[f"{m}.weight"] = (w.double() + adapters.scaling * (b @ a)).to(w.dtype)
    return out
