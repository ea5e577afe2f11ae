"""A sweep row's result (``sweep_row.json`` in its run directory), the one place it is written and
read: written once the row is trained and scored; read for the plan (finished rows, time left) and
the table."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..files import atomic_write

RESULT = "sweep_row.json"


SplitScores = dict[str, float]  # one split's scores by their record keys (its task's: ``Task.scores``) and ppl


@dataclass(frozen=True)
class RowResult:
    """What a finished row reports: its name and group, training steps and minutes (training alone,
    and with scoring), parameters, the scores of each split it was scored on, and its seed (a sweep with
    ``seeds``; None: the spec's)."""

    row: str
    label: str
    steps: int
    train_minutes: float
    wall_minutes: float
    params: int
    scores: dict[str, SplitScores] = field(default_factory=dict)
    seed: int | None = None

    def score(self, split: str, metric: str) -> float | None:
        """``metric`` (a translation's bleu, bleu_lowercase, chrf; ppl) of ``split``; None where it was not scored."""
        return self.scores.get(split, {}).get(metric)


def result_file(folder: Path) -> Path:
    return folder / RESULT


def write_result(folder: Path, result: RowResult) -> Path:
    """Write ``result`` into the row's run directory (atomically); its path."""
    path = result_file(folder)
    data = {k: v for k, v in asdict(result).items() if k != "seed" or v is not None}  # a row without seeds: as before
    atomic_write(path, (json.dumps(data, indent=1) + "\n").encode())
    return path


def read_result(folder: Path) -> RowResult | None:
    """The row's result, None before it finished or if the file is unreadable or not a row's result."""
    try:
        data = json.loads(result_file(folder).read_text(encoding="utf-8"))
        scores = {split: {key: float(value) for key, value in values.items()}
                  for split, values in data.pop("scores").items()}
        return RowResult(**data, scores=scores)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
