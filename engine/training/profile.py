"""``tbuild train --profile N``: N training steps under torch.profiler, after a few untimed ones, and
what they show: a trace for Chrome/Perfetto (and TensorBoard's profiler plugin) in RUN/profile/, and
a short table — wall time per step, how busy the device was, the top kernels or operators, and the
host gaps (the stretches where the GPU waited for the host to launch work).

A profile looks and changes nothing: the steps train the model in memory, but no checkpoint, metrics
line or best weights are written, so the run resumes where it was.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from ..files import atomic_write

if TYPE_CHECKING:
    from .trainer import Trainer

WARMUP = 3  # steps before the profile: compilation, allocator and kernel plans settle
TOP = 10


@dataclass(frozen=True)
class Busy:
    """The device's timeline over a window: how much of it ran kernels, and the gaps between them."""

    window_us: float
    busy_us: float
    gaps_us: list[float]  # idle stretches between kernels, longest first

    @property
    def share(self) -> float:
        return self.busy_us / self.window_us if self.window_us > 0 else 0.0


def busy(intervals: list[tuple[float, float]], window: tuple[float, float]) -> Busy:
    """The union of kernel ``intervals`` (start, end) within ``window``, and the idle gaps between them
    (overlapping kernels on several streams count once)."""
    start, end = window
    covered, gaps, edge = 0.0, [], start
    for a, b in sorted(intervals):
        a, b = max(a, start), min(b, end)
        if b <= edge:
            continue
        if a > edge:
            gaps.append(a - edge)
        covered += b - max(a, edge)
        edge = b
    if end > edge:
        gaps.append(end - edge)
    return Busy(end - start, covered, sorted(gaps, reverse=True))


@dataclass(frozen=True)
class Profile:
    """What ``profile_steps`` found."""

    steps: int
    seconds: float
    device: str
    busy: Busy | None  # None on a CPU: the host is the device
    top: list[tuple[str, float, int]]  # (kernel or operator, self µs in all, calls)
    trace: Path

    def lines(self) -> list[str]:
        """The table, as plain lines."""
        out = [f"profiled {self.steps} steps on {self.device}: {1000 * self.seconds / self.steps:.1f} ms a step; "
               f"trace: {self.trace}"]
        if self.busy is not None:
            gaps = self.busy.gaps_us
            out.append(f"GPU busy {100 * self.busy.share:.1f}% of the wall time; host gaps: {len(gaps)}, "
                       f"{sum(gaps) / 1000:.1f} ms in all, longest {gaps[0] / 1000 if gaps else 0:.2f} ms")
        what = "kernels" if self.busy is not None else "operators"
        out.append(f"top {what} by self time:")
        total = sum(t for _, t, _ in self.top) or 1.0
        out += [f"  {t / 1000:9.2f} ms  {100 * t / total:5.1f}%  {calls:6d}×  {name[:90]}"
                for name, t, calls in self.top]
        return out


def profile_steps(trainer: Trainer, steps: int, out_dir: Path, *, warmup: int = WARMUP) -> Profile:
    """Run ``warmup`` then ``steps`` training steps of ``trainer``, the latter under torch.profiler, and
    write the trace into ``out_dir``. Saves nothing else; releases the run's lock."""
    trainer.model.train()
    try:
        for _ in range(warmup):
            trainer.step()
        return profile_calls(trainer.step, steps, out_dir, device=trainer.policy.device,
                             name=f"step_{trainer.state.step + steps:08d}")
    finally:
        trainer.close()


def profile_calls(step: Callable[[], object], steps: int, out_dir: Path, *, device: torch.device,
                  name: str) -> Profile:
    """``steps`` calls of ``step`` (warm already) under torch.profiler; the trace is ``out_dir/NAME.pt.trace.json``
    (the suffix TensorBoard's profiler plugin reads)."""
    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    _sync(cuda)
    with profile(activities=activities, record_shapes=False) as prof:
        started = time.perf_counter()
        for _ in range(steps):
            step()
        _sync(cuda)
        seconds = time.perf_counter() - started
    out_dir.mkdir(parents=True, exist_ok=True)
    trace = out_dir / f"{name}.pt.trace.json"
    scratch = out_dir / f".{trace.name}.part"
    prof.export_chrome_trace(str(scratch))
    atomic_write(trace, scratch.read_bytes())
    scratch.unlink()
    return Profile(steps, seconds, device.type, _busy(prof) if cuda else None, _top(prof, cuda), trace)


def _sync(cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()


def _top(prof: profile, cuda: bool) -> list[tuple[str, float, int]]:
    """The ``TOP`` kernels (CUDA) or operators (CPU) by self time."""
    key = "self_device_time_total" if cuda else "self_cpu_time_total"
    rows = sorted(prof.key_averages(), key=lambda e: getattr(e, key), reverse=True)
    return [(e.key, float(getattr(e, key)), int(e.count)) for e in rows[:TOP] if getattr(e, key) > 0]


def _busy(prof: profile) -> Busy:
    """The GPU's kernel timeline over the profiled window (from the first to the last event seen)."""
    events = list(prof.events())
    kernels = [(e.time_range.start, e.time_range.end) for e in events if e.device_type == DeviceType.CUDA]
    starts = [e.time_range.start for e in events] or [0.0]
    ends = [e.time_range.end for e in events] or [0.0]
    return busy(kernels, (min(starts), max(ends)))
