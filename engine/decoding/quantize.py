"""tbuild's own int8 decoding (``decode.quantization: int8``, ``--quantization int8``): every linear
layer of the model (attention projections, FFN, and the output projection over the vocabulary, the
largest) computes with int8 weights, one scale per output row, prepacked once for PyTorch's x86 int8
kernels (fbgemm; oneDNN's where the engine is ``onednn``); activations are quantized to 8 bits per call
(``quantized::linear_dynamic``), products accumulate in int32 and come back in float32. Embeddings,
norms, softmax and the search stay float32, as in CTranslate2's int8 on CPU.

The output projection is quantized too where the run's record says its metric holds
(``precision_record.py``), else it computes in float32 on packed weights. Left unpacked in float32 (as
``quantize_dynamic`` left it, a subclass of ``nn.Linear`` it did not match) it was the slowest product of
the step: quantized, the trained recipe's int8 decoding ran at 1.53× float32 instead of 1.27×, with
float32 packed logits at 1.31× (docs/benchmarks.md, int8 decoding on a CPU). Of PyTorch's other int8
paths measured at these shapes, oneDNN's ``qlinear_pointwise`` (activations quantized per tensor) was
within noise of this one, and ``_weight_int8pack_mm`` (weight-only) slower than float32.

CPU only: the quantized kernels have no CUDA implementation, so int8 on a CUDA device is refused
(``--device auto`` picks the CPU for it).
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from ..errors import TbuildError
from .packed import PACKED_TYPES

QUANTIZATIONS = ("float32", "int8")  # what the native engine decodes with
INT8_ENGINES = ("x86", "fbgemm", "onednn")  # PyTorch's quantized engines with int8 × int8 linear kernels on x86
REDUCE_RANGE = True  # 7-bit activations: no int16 saturation in avx2's u8·s8 pair sums (as quantize_dynamic)


def check_quantization(quantization: str, device: torch.device) -> None:
    """Refuse what the native engine cannot do: an unknown type, or int8 off the CPU."""
    if quantization not in QUANTIZATIONS:
        raise TbuildError(f"--quantization {quantization!r}: the native engine supports "
                          f"{' or '.join(QUANTIZATIONS)} (more with --engine ctranslate2)")
    if quantization == "int8" and device.type != "cpu":
        raise TbuildError(f"int8 decoding runs on the CPU only, not {device.type}: use --device cpu, or "
                          "--engine ctranslate2 --quantization int8 on a GPU")


class Int8Linear(nn.Module):
    """x·Wᵀ + b with W quantized to int8 (symmetric, one scale per output row: max |w| / 127) and
    prepacked (inference only)."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias  # kept: counts, state_dict and tying as before
        w = linear.weight.detach().float()
        scale = (w.abs().amax(1) / 127).clamp(min=torch.finfo(torch.float32).tiny).double()
        zero = torch.zeros(w.size(0), dtype=torch.long)
        q = torch.quantize_per_channel(w, scale, zero, 0, torch.qint8)
        bias = None if linear.bias is None else linear.bias.detach().float()
        self.packed = torch.ops.quantized.linear_prepack(q, bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.quantized.linear_dynamic(x, self.packed, REDUCE_RANGE)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, int8"


def quantize_model(model: nn.Module, quantization: str, *, logits: bool = True) -> nn.Module:
    """``model`` (in eval mode, on the CPU) with its linear layers (``PACKED_TYPES``) in ``quantization``,
    the output projection (``model.output``) too unless ``logits`` is False; float32 returns it
    unchanged. The model is changed in place and returned."""
    check_quantization(quantization, next(model.parameters()).device)
    if quantization == "float32":
        return model
    if torch.backends.quantized.engine not in INT8_ENGINES or not hasattr(torch.ops.quantized, "linear_dynamic"):
        raise TbuildError(f"int8 decoding needs PyTorch's x86 int8 kernels (quantized engine "
                          f"{torch.backends.quantized.engine!r} here): use --engine ctranslate2 --quantization int8")
    output = None if logits else getattr(model, "output", None)
    linears = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
               if type(child) in PACKED_TYPES and child is not output]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.quantize_per_channel's deprecation notice (the kernels stay)
        for parent, name, linear in linears:
            setattr(parent, name, Int8Linear(linear))
    return model
