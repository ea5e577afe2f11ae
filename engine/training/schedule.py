"""Learning-rate schedules (§5.3)."""

from __future__ import annotations

from tbuild.builder.schema import ScheduleSpec


def learning_rate(step: int, schedule: ScheduleSpec, d_model: int) -> float:
    """The learning rate for update ``step`` (1-based)."""
    step = max(step, 1)
    warmup = schedule.warmup
    if schedule.kind == "noam":
        # lrate = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)  (§5.3, Eq. 3)
        return schedule.factor * d_model**-0.5 * min(step**-0.5, step * max(warmup, 1) ** -1.5)
    if schedule.kind == "inverse_sqrt":  # linear warmup to lr, then lr · sqrt(warmup / step)
        return schedule.lr * (step / warmup if step < warmup else (max(warmup, 1) / step) ** 0.5)
    return schedule.lr * (min(1.0, step / warmup) if warmup else 1.0)  # constant after warmup
