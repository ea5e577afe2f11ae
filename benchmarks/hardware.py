"""The machine a benchmark ran on, and its matrix-multiply peak: CPU model, threads and the ISA flags
that decide bf16 speed, or the GPU's name, capability and memory; a GEMM measured in the same run,
and on a GPU the datasheet's dense bf16 peak beside it."""

from __future__ import annotations

import os
import platform
import statistics
import time
from dataclasses import asdict, dataclass, field

import torch

FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")

# Dense (no sparsity) bf16 tensor-core peaks from NVIDIA's datasheets, TFLOP/s; matched in this order
# against torch.cuda.get_device_name (first match wins, so the more specific names come first).
GPU_BF16_TFLOPS = (
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.0),  # SXM (HBM3)
    ("H200", 989.0),
    ("GH200", 989.0),
    ("A100", 312.0),
    ("L40S", 362.0),
    ("L4", 121.0),
)


@dataclass
class Hardware:
    """What ran the benchmark; ``to_json`` for the report."""

    cpu_model: str
    threads: int
    flags: dict[str, bool]
    torch: str
    gpu: dict | None = None  # name, capability, memory_gib, datasheet_bf16_tflops (None: not in the table)
    python: str = field(default_factory=platform.python_version)

    @property
    def native_bf16(self) -> bool:
        """The CPU computes bf16 in hardware (AMX or AVX512-BF16), so bf16 autocast can pay off."""
        return self.flags.get("amx_bf16", False) or self.flags.get("avx512_bf16", False)

    def to_json(self) -> dict:
        return {**asdict(self), "native_bf16": self.native_bf16}


def cpu_info() -> tuple[str, set[str]]:
    """The CPU's model name and flags from /proc/cpuinfo (platform's names elsewhere, no flags)."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return platform.processor() or platform.machine(), set()
    model, flags = platform.machine(), set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and model == platform.machine():
            model = value.strip()
        elif key.strip() == "flags" and not flags:
            flags = set(value.split())
    return model, flags


def gpu_info() -> dict | None:
    """Name, compute capability, memory and datasheet bf16 peak of CUDA device 0, or None."""
    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(0)
    name = torch.cuda.get_device_name(0)
    peak = next((tflops for key, tflops in GPU_BF16_TFLOPS if key.lower() in name.lower()), None)
    return {"name": name, "capability": f"{props.major}.{props.minor}",
            "memory_gib": round(props.total_memory / 2**30, 1), "datasheet_bf16_tflops": peak}


def detect() -> Hardware:
    """The hardware this process sees, with the thread count torch will use."""
    model, flags = cpu_info()
    return Hardware(model, torch.get_num_threads(), {f: f in flags for f in FLAGS}, torch.__version__,
                    gpu_info())


def gemm_gflops(device: torch.device, dtype: torch.dtype, n: int, repeats: int) -> float:
    """Median GFLOP/s of an (n, n) @ (n, n) matrix product in ``dtype`` on ``device`` (2·n³ FLOPs each),
    after one untimed product."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=gen).to(device, dtype)
    b = torch.randn(n, n, generator=gen).to(device, dtype)
    out = torch.empty(n, n, device=device, dtype=dtype)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    torch.matmul(a, b, out=out)
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.matmul(a, b, out=out)
        sync()
        times.append(time.perf_counter() - start)
    return 2 * n**3 / statistics.median(times) / 1e9


def measured_peaks(device: torch.device, n: int, repeats: int) -> dict[str, float]:
    """Measured fp32 and bf16 matmul GFLOP/s on ``device`` (medians)."""
    return {name: round(gemm_gflops(device, dtype, n, repeats), 1)
            for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))}


def mfu_peak(hw: Hardware, device: str, precision: str, measured: dict[str, float]) -> tuple[float, str]:
    """The MFU denominator in GFLOP/s and where it comes from: on a GPU its datasheet dense bf16 peak
    when the table knows it, else (and on a CPU always) the matmul peak measured in this run."""
    if device == "cuda" and hw.gpu is not None and hw.gpu["datasheet_bf16_tflops"] and precision == "bf16":
        return hw.gpu["datasheet_bf16_tflops"] * 1e3, f"{hw.gpu['name']} datasheet dense bf16"
    return measured[precision], f"measured {precision} matmul in this run"


def cores() -> int:
    """CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
