"""A CPU run's ``precision: auto`` confirmed from its own steps. The probe (``device/precision.py``) times a few
matrix products before training, and a busy machine skews it (seen: bf16 at 0.66× fp32 on shared cores, 2.03×
alone), so its choice is not trusted for the whole run: after WARMUP steps, each of the next WINDOW steps is
followed by the same batches' forward and backward in the other precision (its gradients discarded, every
random stream left as it was, so training itself is unchanged), and the faster by the probe's rule (bf16 when it
is at least BF16_MIN_SPEEDUP × fp32's speed in tokens per second) trains the rest. The verdict is saved in the
checkpoints' state with the CPU it was measured on, so a resumed run continues in it on that CPU (another CPU
checks again)."""

from __future__ import annotations

import hashlib
import json
import statistics
from dataclasses import dataclass, field, replace

import torch

from ..device.policy import DTYPES, Policy
from ..device.precision import BF16_MIN_SPEEDUP, cpu_identity

WARMUP = 3  # steps before timing: allocator and caches settle
WINDOW = 8  # steps timed in each precision


def cpu_key() -> str:
    """A short hash of the CPU, its flags, torch and the thread count (what a verdict holds for)."""
    return hashlib.sha256(json.dumps(cpu_identity(), sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class PrecisionCheck:
    """The timings of one call's first steps in both precisions (seconds per target token of forward and
    backward), and the step they started at."""

    chosen: str  # the precision the run trains in: "fp32" or "bf16"
    start: int  # the state's step when this call began
    seconds: dict[str, list[float]] = field(default_factory=lambda: {"fp32": [], "bf16": []})

    @property
    def other(self) -> str:
        return "fp32" if self.chosen == "bf16" else "bf16"

    def timing(self, step: int) -> bool:
        """Whether the step about to run (the state's ``step`` before it) is timed."""
        return self.start + WARMUP <= step < self.start + WARMUP + WINDOW

    def record(self, precision: str, seconds: float, tokens: int) -> None:
        self.seconds[precision].append(seconds / max(tokens, 1))

    def ratio(self) -> float:
        """bf16's speed over fp32's, medians of the timed steps (above 1: bf16 is faster)."""
        return statistics.median(self.seconds["fp32"]) / statistics.median(self.seconds["bf16"])

    def verdict(self) -> str | None:
        """The precision to train in once every timed step is in (None before)."""
        if min(len(times) for times in self.seconds.values()) < WINDOW:
            return None
        return "bf16" if self.ratio() >= BF16_MIN_SPEEDUP else "fp32"


def resumed(policy: Policy, saved: str | None, saved_cpu: str | None) -> tuple[Policy, bool]:
    """The policy of a call, and whether its steps are to be checked: a verdict saved on this CPU decides
    (no check); otherwise a probed ``auto`` (``Policy.checkable``) is checked."""
    if not policy.checkable:
        return policy, False
    if saved in ("fp32", "bf16") and saved_cpu == cpu_key():
        note = f"precision auto → {saved} (this run's own steps measured it on this CPU)"
        return replace(policy, autocast_dtype=DTYPES[saved], note=note), False
    return policy, True


def decided(policy: Policy, check: PrecisionCheck, step: int) -> tuple[Policy, str]:
    """The policy after the check, whose last timed step is ``step`` (counted as the log counts steps), and the
    line that says what the steps measured."""
    chosen = check.verdict()
    assert chosen is not None
    how = f"real steps ran bf16 at {check.ratio():.2f}× fp32's speed"
    if chosen == check.chosen:
        return policy, f"precision auto → {chosen} confirmed after step {step} ({how})"
    note = f"precision auto → {chosen} after step {step} ({how}; the probe had chosen {check.chosen})"
    return replace(policy, autocast_dtype=DTYPES[chosen], note=note), note


def autocast(precision: str) -> torch.autocast:
    """CPU autocast for ``precision`` (disabled for fp32)."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")
