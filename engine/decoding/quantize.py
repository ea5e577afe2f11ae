"""tbuild's own int8 decoding (``decode.quantization: int8``, ``--quantization int8``): every
``nn.Linear`` of the model (attention projections, FFN, the output projection) becomes PyTorch's
dynamically quantized linear: int8 weights with one scale per output row, activations quantized to
int8 per batch on the fly, int32 accumulation (fbgemm/x86 kernels), the result back in float32.
Embeddings, norms, softmax and the search stay float32, as in CTranslate2's int8 on CPU.

CPU only: the quantized kernels have no CUDA implementation, so int8 on a CUDA device is refused
(``--device auto`` picks the CPU for it). Chosen after measuring the int8 paths of PyTorch on CPU
(docs/benchmarks.md): ``quantize_dynamic`` was the one faster than float32. ``torch.ao.quantization``
warns that it is deprecated; it is the only fast int8 CPU path in eager PyTorch today, so its absence
is reported as a clear error rather than a traceback.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from ..errors import TbuildError

QUANTIZATIONS = ("float32", "int8")  # what the native engine decodes with


def check_quantization(quantization: str, device: torch.device) -> None:
    """Refuse what the native engine cannot do: an unknown type, or int8 off the CPU."""
    if quantization not in QUANTIZATIONS:
        raise TbuildError(f"--quantization {quantization!r}: the native engine supports "
                          f"{' or '.join(QUANTIZATIONS)} (more with --engine ctranslate2)")
    if quantization == "int8" and device.type != "cpu":
        raise TbuildError(f"int8 decoding runs on the CPU only, not {device.type}: use --device cpu, or "
                          "--engine ctranslate2 --quantization int8 on a GPU")


def quantize_model(model: nn.Module, quantization: str) -> nn.Module:
    """``model`` (in eval mode, on the CPU) with its linear layers in ``quantization``; float32 returns
    it unchanged. The model is changed in place and returned."""
    check_quantization(quantization, next(model.parameters()).device)
    if quantization == "float32":
        return model
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.ao.quantization's deprecation notice
            from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic
    except ImportError:
        raise TbuildError(f"int8 decoding needs torch.ao.quantization.quantize_dynamic, which torch "
                          f"{torch.__version__} lacks: use --engine ctranslate2 --quantization int8") from None
    if not {"x86", "fbgemm"} & set(torch.backends.quantized.supported_engines):
        raise TbuildError("int8 decoding needs PyTorch's x86/fbgemm quantized kernels, missing from this build")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return quantize_dynamic(model, {nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8, inplace=True)
