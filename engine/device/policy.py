"""One device and precision policy for every command: CUDA when present, with bf16 autocast where
the GPU has it and fp16 autocast with a gradient scaler where it does not (V100, T4); the CPU
otherwise, where training's ``auto`` takes bf16 autocast only if a probe measures it clearly faster
than fp32 at the model's widths (``precision.py``), and decoding's bf16 runs the linear layers' products
in bf16 on packed weights (``decoding/packed.py``), its ``auto`` as the run's record says
(``decoding/precision_record.py``). Each policy says what it chose and why."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from tbuild.builder.spec import Spec

from ..errors import TbuildError
from .precision import BF16_MIN_SPEEDUP, Probe, bf16_probe

Precision = Literal["auto", "fp32", "bf16", "fp16"]
DEVICES = ("auto", "cpu", "cuda")
DTYPES: dict[str, torch.dtype | None] = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
BF16_LOGITS = "bf16, bf16 logits"  # CPU decoding: bf16 products, the output projection's too (a run's record chose it)
NOT_RECORDED = ("no bf16 check recorded for this run on this CPU; tbuild decode, evaluate and serve make one, "
                "--precision fp32 keeps fp32")


@dataclass(frozen=True)
class Policy:
    """Where tensors live and which dtype autocast computes in (None: plain fp32)."""

    device: torch.device
    autocast_dtype: torch.dtype | None = None
    note: str = ""  # one line: what was chosen and why, e.g. "precision auto → fp32 (bf16 matmul 0.02× fp32 …)"
    warning: str | None = None  # a choice the user forced that measures slower
    checkable: bool = False  # a CPU's auto chosen by the probe: training confirms it from its own steps
    products: torch.dtype | None = None  # CPU decoding: the linear layers' products in this dtype (packed.py)
    logits: torch.dtype | None = None  # CPU decoding: the output projection's (None: float32)

    @property
    def precision(self) -> str:
        dtype = self.autocast_dtype or self.products
        return {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, "fp32")  # type: ignore[arg-type]

    def grad_scaler(self) -> torch.amp.GradScaler:
        """A loss scaler for fp16 (its gradients underflow without one); a disabled one otherwise,
        whose scale/unscale_/step/update calls are plain pass-throughs."""
        return torch.amp.GradScaler(self.device.type, enabled=self.autocast_dtype == torch.float16)

    def to_device(self, t: torch.Tensor) -> torch.Tensor:
        """A host tensor on the device: on CUDA through pinned memory, without waiting for the copy."""
        if self.device.type != "cuda":
            return t.to(self.device)
        return self.pin(t).to(self.device, non_blocking=True)

    def pin(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` in pinned (page-locked) host memory on CUDA, which a copy can read without the host
        waiting; ``t`` itself elsewhere or when it is pinned already."""
        return t.pin_memory() if self.device.type == "cuda" and not t.is_pinned() else t

    @property
    def feed_ahead(self) -> int:
        """Training batches collated ahead on a worker thread (``training/feed.py``): two on CUDA, so the
        host never holds the GPU up; none on CPU, where collating is ~0.1% of a step."""
        return 2 if self.device.type == "cuda" else 0

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    def attention(self) -> contextlib.AbstractContextManager:
        """The fused attention kernels allowed on this device, in order of preference (see
        ``attention_backends``); PyTorch's own choice where that returns None."""
        backends = attention_backends(self.device)
        if backends is None:
            return contextlib.nullcontext()
        return sdpa_kernel(backends, set_priority=True)

    def shape_buckets(self, cuda_graphs: bool = False) -> tuple[int, int]:
        """Default (pad_multiple, row_steps) of training batches. CUDA: lengths padded to multiples of 8
        (tensor-core tiles, and few shapes); the row count too (8 sizes per doubling) only for CUDA graphs,
        which record one graph per shape: graphs traced with symbolic shapes serve any row count, and
        padded rows are work for nothing (WMT-like batches: 1.26x the real tokens with rows bucketed,
        1.07x without). CPU: exact, where padding is only extra work."""
        if self.device.type != "cuda":
            return (1, 0)
        return (8, 8 if cuda_graphs else 0)


def attention_backends(device: torch.device) -> list[SDPBackend] | None:
    """The scaled-dot-product attention backends for ``device``, best first.

    CUDA: flash attention where it applies (no attn_mask: causal self-attention; needs fp16/bf16), else
    memory-efficient attention (takes the padding mask; fp32 too), math as the last resort. Not cuDNN:
    it builds an execution plan for every new (batch, length) shape, which made most of a length-bucketed
    GPU training step's CPU time (docs/benchmarks.md). CPU: None, PyTorch's choice
    (its flash kernel; ``components.attention`` already keeps bf16 and single queries off it)."""
    if device.type != "cuda":
        return None
    return [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def choose_device(name: str = "auto") -> torch.device:
    """``auto``: CUDA if available, else CPU; ``cuda`` refuses a machine without one."""
    if name not in DEVICES:
        raise TbuildError(f"unknown device {name!r}; choose from {', '.join(DEVICES)}")
    if name == "cuda" and not torch.cuda.is_available():
        raise TbuildError("device cuda: no CUDA device is available to PyTorch on this machine")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def choose_policy(precision: Precision, device: str = "auto", *, widths: tuple[int, int] | None = None,
                  decoding: bool = False, probe: Callable[[int, int], Probe] = bf16_probe,
                  recorded: tuple[str, str] | None = None) -> Policy:
    """The policy for ``precision`` on ``device``. CUDA: ``auto`` is bf16 autocast where the GPU has
    it, else fp16 (with a loss scaler). CPU: fp16 is refused; training's ``auto`` is bf16 only when
    ``probe`` at ``widths`` (d_model, d_ff) measures bf16 products at least BF16_MIN_SPEEDUP × fp32's;
    decoding's bf16 is bf16 products (``products``, no autocast) and its ``auto`` is what ``recorded``
    (precision, why: the run's record, ``decoding/precision_record.py``) says, fp32 without one; a
    forced bf16 that measures slower than fp32 carries a warning."""
    dev = choose_device(device)
    if precision == "fp16" and dev.type != "cuda":
        raise TbuildError(f"precision fp16 needs a CUDA device (this run is on {dev.type}); use bf16 or fp32")
    if dev.type == "cuda":
        if precision != "auto":
            return Policy(dev, DTYPES.get(precision), f"precision {precision} (set in the spec)")
        if torch.cuda.is_bf16_supported():
            return Policy(dev, torch.bfloat16, "precision auto → bf16 (this GPU computes in bf16)")
        return Policy(dev, torch.float16, "precision auto → fp16 with a loss scaler (this GPU has no bf16)")
    if precision == "fp32":
        return Policy(dev, None, "precision fp32 (set in the spec)")
    if precision == "auto" and decoding:
        chosen, why = recorded or ("fp32", NOT_RECORDED)
        products = DTYPES["bf16" if chosen == BF16_LOGITS else chosen]
        return Policy(dev, None, f"precision auto → {chosen} ({why})", products=products,
                      logits=products if chosen == BF16_LOGITS else None)
    if widths is None:  # nothing to measure at: keep the safe choice
        if precision == "bf16":
            bf16 = torch.bfloat16
            return Policy(dev, None if decoding else bf16, "precision bf16 (set in the spec)",
                          products=bf16 if decoding else None)
        return Policy(dev, None, "precision auto → fp32 (no model widths to measure bf16 at)")
    measured = probe(*widths)
    if precision == "bf16":
        slower = None
        if measured.ratio < 1:
            slower = (f"precision bf16 is set, but bf16 matmuls run at {measured.ratio:.2f}× the fp32 speed on "
                      f"this CPU: precision auto (or fp32) would be faster")
        note = f"precision bf16 (set in the spec; {measured.describe()})"
        if decoding:
            return Policy(dev, None, note, slower, products=torch.bfloat16)
        return Policy(dev, torch.bfloat16, note, slower)
    chosen = "bf16" if measured.ratio >= BF16_MIN_SPEEDUP else "fp32"
    return Policy(dev, DTYPES[chosen], f"precision auto → {chosen} ({measured.describe()})", checkable=True)


def model_widths(spec: Spec) -> tuple[int, int]:
    """(d_model, d_ff) of a spec's model: the widths the CPU precision probe measures at."""
    first = next(iter(spec.model.stacks().values()))  # the encoder's, or a decoder-only model's decoder's
    return spec.model.d_model, first.d_ff
