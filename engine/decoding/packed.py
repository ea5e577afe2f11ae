"""float32 decoding on a CPU with the linear layers' weights reordered once into oneDNN's blocked
layout (the "packed" weights that CTranslate2 and inductor's frozen graphs also use), instead of
repacked by every product as ``F.linear`` does.

Measured with torch 2.13 on an AMD EPYC Zen 4 (avx512, one thread), 256 rows: the output projection
256×256 by 8000×256 ran at 104 GFLOP/s packed against 77 plainly, the feed-forward products at
110 against 90; the tiny benchmark's beam 4 and greedy decoding gained 13% and 22% (docs/benchmarks.md,
Decoding speed). Results equal ``F.linear``'s to float32 rounding (a different summation order).

Only where it applies: the CPU, float32 weights without autocast, PyTorch built with oneDNN (the
official wheels are) and exposing its packed linear; anywhere else the model is left as it is.
The parameters stay (parameter counts and ``state_dict`` are unchanged); the packed copies are extra
memory, one more copy of every linear weight.
"""

from __future__ import annotations

import torch
from torch import nn

PACK_ROWS = 256  # the batch size oneDNN chooses its layout for (a search step's rows: 64 sentences × beam 4)


def packing_available() -> bool:
    """PyTorch's oneDNN packed linear is here (an internal API: checked, never assumed)."""
    ops = torch.ops.mkldnn
    return (torch.backends.mkldnn.is_available() and hasattr(ops, "_reorder_linear_weight")
            and hasattr(ops, "_linear_pointwise"))


class PackedLinear(nn.Module):
    """``nn.Linear``'s product with the weight in oneDNN's blocked layout (inference only)."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias  # kept: counts, state_dict and tying as before
        self.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), PACK_ROWS)
        self.packed_bias = None if linear.bias is None else linear.bias.detach()  # the op has no autograd

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.packed_bias, "none", [], "")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def pack_linears(model: nn.Module) -> bool:
    """Replace, in place, every float32 CPU ``nn.Linear`` of ``model`` by a ``PackedLinear``; False
    (the model unchanged) where packing does not apply (module docstring)."""
    linears = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
               if type(child) is nn.Linear]
    if not linears or not packing_available():
        return False
    if any(lin.weight.device.type != "cpu" or lin.weight.dtype != torch.float32 for _, _, lin in linears):
        return False
    for parent, name, linear in linears:
        setattr(parent, name, PackedLinear(linear))
    return True
