"""Learning-rate schedules (§5.3)."""

from __future__ import annotations

from tbuild.builder.schema import ScheduleSpec


def learning_rate(step: int, schedule: ScheduleSpec, d_model: int) -> float:
    """The learning rate for update ``step`` (1-based); the formulas live on the schedule specs."""
    return schedule.rate(step, d_model)
