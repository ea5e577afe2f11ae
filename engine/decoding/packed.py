"""CPU decoding with the linear layers' weights reordered once into oneDNN's blocked layout (the
"packed" weights that CTranslate2 and inductor's frozen graphs also use), instead of repacked by every
product as ``F.linear`` does; in float32, or in bf16 where decoding's precision is bf16.

float32: measured with torch 2.13 on an AMD EPYC Zen 4 (avx512, one thread), 256 rows: the output
projection 256×256 by 8000×256 ran at 104 GFLOP/s packed against 77 plainly, the feed-forward products at
110 against 90; the tiny benchmark's beam 4 and greedy decoding gained 13% and 22% (docs/benchmarks.md,
Decoding speed). Results equal ``F.linear``'s to float32 rounding (a different summation order).

bf16 (``decode.precision: bf16``, or ``auto`` where the run's record chose it, ``precision_record.py``):
the products of the encoder's and decoder's layers take bf16 inputs and bf16 packed weights (float32
accumulation inside oneDNN) and hand float32 back, so the residual stream, norms, attention, the
cache and the search stay float32; the output projection stays float32 unless the run's decoding check
chose bf16 logits too (``precision_record.py``): bf16 logits (8 bits of mantissa: steps of 0.125 at 20)
change which hypotheses the beam keeps more often than bf16 layers alone (docs/benchmarks.md, bf16
decoding on a CPU), so they are used only where the validation metric holds. Faster than bf16 autocast,
which casts every weight again at every product.

A self-attention block's W^Q, W^K and W^V read the same input: they are also packed as one product
(``FusedLinears``, the block's ``fused_qkv``), one call and one pair of casts where there were three, which
is what a step at a few rows (one sentence, beam 4) spends most on; each output column is the same
product of the same row and column as before.

Only where it applies: the CPU, float32 weights without autocast, PyTorch built with oneDNN (the
official wheels are) and exposing its packed linear; anywhere else the model is left as it is.
The parameters stay (parameter counts and ``state_dict`` are unchanged); the packed copies are extra
memory, one more copy of every linear weight.
"""

from __future__ import annotations

import torch
from torch import nn

from tbuild.components.attention import AttentionBlock

PACK_ROWS = 256  # the batch size oneDNN chooses its layout for (a search step's rows: 64 sentences × beam 4)
PACKED_TYPES = (nn.Linear,)  # exactly this type: a head or LoRA layer computes more than x·Wᵀ + b


def packing_available() -> bool:
    """PyTorch's oneDNN packed linear is here (an internal API: checked, never assumed)."""
    ops = torch.ops.mkldnn
    return (torch.backends.mkldnn.is_available() and hasattr(ops, "_reorder_linear_weight")
            and hasattr(ops, "_linear_pointwise"))


class _Packed(nn.Module):
    """x·Wᵀ + b with W in oneDNN's blocked layout, computed in ``dtype`` and returned in the input's dtype
    (inference only: the op has no autograd)."""

    def _pack(self, weight: torch.Tensor, bias: torch.Tensor | None, dtype: torch.dtype) -> None:
        self.dtype = dtype
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach().to(dtype), PACK_ROWS)
        self.packed_bias = None if bias is None else bias.detach().to(dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.ops.mkldnn._linear_pointwise(x.to(self.dtype), self.packed, self.packed_bias, "none", [], "")
        return y.to(x.dtype)


class PackedLinear(_Packed):
    """``nn.Linear``'s product, packed (``_Packed``); the layer's parameters kept."""

    def __init__(self, linear: nn.Linear, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias  # kept: counts, state_dict and tying as before
        self._pack(linear.weight, linear.bias, dtype)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
                f"dtype={str(self.dtype).removeprefix('torch.')}")


class FusedLinears(_Packed):
    """Linear layers that read the same input as one packed product, their outputs side by side; it holds the
    packed copy alone, the layers keep their parameters."""

    def __init__(self, linears: list[PackedLinear]) -> None:
        super().__init__()
        biases = [lin.bias for lin in linears]
        bias = None if biases[0] is None else torch.cat([b.detach() for b in biases])  # type: ignore[union-attr]
        self._pack(torch.cat([lin.weight.detach() for lin in linears]), bias, linears[0].dtype)


def fuse_self_attention(model: nn.Module) -> int:
    """Give every self-attention block of ``model`` (a ``self_attn…`` sublayer) whose W^Q, W^K and W^V are
    packed alike one fused product (``AttentionBlock.fused_qkv``); returns how many."""
    fused = 0
    for name, block in model.named_modules():
        owner = name.rpartition(".")[0].rpartition(".")[2]  # decoder.0.self_attn.sublayer -> self_attn
        if not isinstance(block, AttentionBlock) or not owner.startswith("self_attn"):
            continue
        linears = [block.w_q, block.w_k, block.w_v]
        if not all(isinstance(lin, PackedLinear) for lin in linears):
            continue
        if len({lin.dtype for lin in linears}) == 1 and len({lin.bias is None for lin in linears}) == 1:
            block.fused_qkv = FusedLinears(linears)
            fused += 1
    return fused


def pack_linears(model: nn.Module, products: torch.dtype = torch.float32, logits: torch.dtype = torch.float32
                 ) -> bool:
    """Replace, in place, every float32 CPU linear layer of ``model`` (``PACKED_TYPES``) by a
    ``PackedLinear`` computing in ``products``, but the model's output projection (``model.output``),
    which computes in ``logits`` (float32 unless a run's check chose bf16, ``precision_record.py``); False
    (the model unchanged) where packing does not apply (module docstring)."""
    output = getattr(model, "output", None)
    linears = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
               if type(child) in PACKED_TYPES]
    if not linears or not packing_available():
        return False
    if any(lin.weight.device.type != "cpu" or lin.weight.dtype != torch.float32 for _, _, lin in linears):
        return False
    for parent, name, linear in linears:
        setattr(parent, name, PackedLinear(linear, logits if linear is output else products))
    fuse_self_attention(model)
    return True
