"""Whether bf16 autocast pays off on this CPU, by measurement: a short probe of fp32 and bf16 matrix
products at the model's own widths, interleaved over rounds, cached per machine (CPU model and flags, torch
version, threads, widths) in the user's cache folder unless the machine was busy or the rounds disagree
(``tbuild precision`` shows and clears the cache); training confirms it from its own steps
(``training/precision_check.py``). CPU flags alone do not tell: bf16 is emulated without AVX512-BF16
or AMX (far slower than fp32), and a CPU with AVX512-BF16 but no AMX can still run bf16 products slower
than fp32 where another runs them faster (docs/benchmarks.md, docs/training.md)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from ..files import atomic_write

BF16_MIN_SPEEDUP = 1.2  # auto takes bf16 only when it is clearly faster, not within noise
PROBE_ROWS = 1024  # tokens per probed product (a training batch has thousands)
PROBE_MAX_FLOP = 2.5e8  # per product: fewer rows for wide models, so emulated bf16 stays well under a second
PROBE_SECONDS = 0.08  # per shape and dtype, at most (after one warm-up product)
PROBE_REPEATS = 15
PROBE_ROUNDS = 3  # rounds of both precisions, interleaved
PROBE_SPREAD = 1.5  # the rounds' bf16/fp32 ratios must agree within this factor for the result to be cached

Measure = Callable[[str, tuple[int, int, int]], float]  # (dtype name, (rows, in, out)) -> seconds per product


@dataclass(frozen=True)
class Probe:
    """Measured speed of bf16-autocast over fp32 linear layers at some widths on this CPU."""

    fp32_gflops: float
    bf16_gflops: float
    cached: bool = False

    @property
    def ratio(self) -> float:
        """bf16's speed over fp32's (above 1: bf16 is faster)."""
        return self.bf16_gflops / self.fp32_gflops

    def describe(self) -> str:
        how = "cached measurement" if self.cached else "measured now"
        return f"bf16 matmul {self.ratio:.2f}× fp32 on this CPU, {how}"


def cache_dir() -> Path:
    """Where tbuild keeps what it measures or fetches per user: $TBUILD_CACHE_DIR, else
    $XDG_CACHE_HOME/tbuild, else ~/.cache/tbuild."""
    if os.environ.get("TBUILD_CACHE_DIR"):
        return Path(os.environ["TBUILD_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tbuild"


def cpu_identity() -> dict[str, str]:
    """The facts a CPU measurement depends on: model name and ISA flags (from /proc/cpuinfo on Linux;
    platform's names elsewhere), torch version and thread count."""
    model, flags = cpu_model_and_flags()
    return {"cpu": model, "flags": hashlib.sha256(" ".join(sorted(flags)).encode()).hexdigest()[:16],
            "torch": torch.__version__, "threads": str(torch.get_num_threads())}


def cpu_model_and_flags() -> tuple[str, set[str]]:
    """The CPU's model name and ISA flags (``avx512_bf16``, ``amx_bf16``, …) from /proc/cpuinfo on Linux;
    platform's name and no flags elsewhere."""
    model, flags = platform.processor() or platform.machine(), None
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and model in (platform.processor(), platform.machine()):
            model = value.strip()
        elif key.strip() == "flags" and flags is None:
            flags = set(value.split())
    return model, flags or set()


def time_linear(dtype: str, shape: tuple[int, int, int]) -> float:
    """Median seconds of one ``F.linear`` of (rows, d_in) by (d_out, d_in) fp32 tensors, under bf16 CPU
    autocast for ``dtype`` "bf16" (as a model's layers run), plainly for "fp32"; one product first,
    then up to PROBE_REPEATS within PROBE_SECONDS."""
    rows, d_in, d_out = shape
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(rows, d_in, generator=gen), torch.randn(d_out, d_in, generator=gen)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
        F.linear(x, w)
        times: list[float] = []
        start = time.perf_counter()
        while len(times) < PROBE_REPEATS and (not times or time.perf_counter() - start < PROBE_SECONDS):
            t = time.perf_counter()
            F.linear(x, w)
            times.append(time.perf_counter() - t)
    return statistics.median(times)


def probe_shapes(d_model: int, d_ff: int) -> list[tuple[int, int, int]]:
    """The feed-forward layer's two products (d_model -> d_ff -> d_model), the widest of a layer."""
    rows = max(64, min(PROBE_ROWS, int(PROBE_MAX_FLOP / (2 * d_model * d_ff))))
    return [(rows, d_model, d_ff), (rows, d_ff, d_model)]


def measure(d_model: int, d_ff: int, timer: Measure = time_linear) -> Probe:
    """GFLOP/s of fp32 and bf16-autocast linear layers at these widths (totals over the shapes): the two
    precisions interleaved over PROBE_ROUNDS rounds (fp32 first, then bf16 first, …), so that load which comes
    and goes hits both alike, and the median round of each taken."""
    return _measured(d_model, d_ff, timer)[0]


def _measured(d_model: int, d_ff: int, timer: Measure) -> tuple[Probe, bool]:
    """``measure``, and whether its rounds agree: each round's bf16/fp32 ratio within PROBE_SPREAD of the
    others' (rounds that disagree mean the machine's speed changed while it measured: not to be kept)."""
    shapes = probe_shapes(d_model, d_ff)
    flop = sum(2 * r * i * o for r, i, o in shapes)
    rounds: dict[str, list[float]] = {"fp32": [], "bf16": []}
    for n in range(PROBE_ROUNDS):
        for dtype in ("fp32", "bf16") if n % 2 == 0 else ("bf16", "fp32"):
            rounds[dtype].append(sum(timer(dtype, s) for s in shapes))
    ratios = [fp32 / bf16 for fp32, bf16 in zip(rounds["fp32"], rounds["bf16"], strict=True)]
    probe = Probe(flop / statistics.median(rounds["fp32"]) / 1e9, flop / statistics.median(rounds["bf16"]) / 1e9)
    return probe, max(ratios) <= PROBE_SPREAD * min(ratios)


def bf16_probe(d_model: int, d_ff: int, timer: Measure = time_linear, cache: Path | None = None) -> Probe:
    """The probe for these widths on this machine: from the cache when it holds this machine's
    measurement (same CPU, flags, torch, threads), else measured now and cached, unless the machine is
    busy. An unreadable cache is measured over; an unwritable one only means measuring next time too."""
    path = (cache or cache_dir()) / "precision.json"
    key = json.dumps({**cpu_identity(), "d_model": d_model, "d_ff": d_ff}, sort_keys=True)
    entries = _read_cache(path)
    with contextlib.suppress(KeyError, TypeError, ValueError):
        return Probe(float(entries[key]["fp32_gflops"]), float(entries[key]["bf16_gflops"]), cached=True)
    idle = not machine_busy()
    probe, steady = _measured(d_model, d_ff, timer)
    # other work skews the timings (seen: bf16 0.77× on a CPU where it is 2.7×): a measurement taken while the
    # machine was busy before or after it, or whose rounds disagree, is used this once but not kept
    if not (idle and steady and not machine_busy()):
        return probe
    entries[key] = {"fp32_gflops": round(probe.fp32_gflops, 2), "bf16_gflops": round(probe.bf16_gflops, 2),
                    "measured": time.strftime("%Y-%m-%d %H:%M:%S")}
    with contextlib.suppress(OSError):
        atomic_write(path, (json.dumps(entries, indent=1, sort_keys=True) + "\n").encode())
    return probe


@dataclass(frozen=True)
class Cached:
    """One cached probe: the machine and widths it holds for, what it measured and when."""

    machine: dict[str, str]  # cpu, flags (a hash), torch, threads
    widths: tuple[int, int]  # d_model, d_ff
    probe: Probe
    measured: str


def cached_probes(cache: Path | None = None) -> list[Cached]:
    """The probes cached in ``cache`` (default: the user's cache folder), the damaged entries left out."""
    found = []
    for key, entry in _read_cache((cache or cache_dir()) / "precision.json").items():
        with contextlib.suppress(KeyError, TypeError, ValueError, AttributeError):
            facts = json.loads(key)
            widths = (int(facts.pop("d_model")), int(facts.pop("d_ff")))
            probe = Probe(float(entry["fp32_gflops"]), float(entry["bf16_gflops"]), cached=True)
            found.append(Cached(facts, widths, probe, str(entry.get("measured", "?"))))
    return found


def clear_probes(cache: Path | None = None) -> int:
    """Forget every cached probe (the next run measures again); returns how many there were."""
    path = (cache or cache_dir()) / "precision.json"
    count = len(_read_cache(path))
    path.unlink(missing_ok=True)
    return count


def machine_busy() -> bool:
    """More runnable processes than cores over the last minute (the load average), so a timing taken now
    may not hold on this machine later."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # not available on this platform
        return False
    return load > (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def _read_cache(path: Path) -> dict:
    """The cached measurements, or none if the file is missing or damaged."""
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return entries if isinstance(entries, dict) else {}
