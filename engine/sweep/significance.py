"""Each row of a sweep against its reference row on every split both were scored on: paired bootstrap
resampling of BLEU (sacreBLEU's test, ``engine/significance.py``) on the outputs their scoring kept (a row
scored before outputs were kept is decoded again). A row run over several seeds is compared as the mean over its
seeds: each resample takes the same sentences from every seed's outputs, of both rows, and scores each row as
the mean of its seeds' BLEU on them; the difference is that of the two means, the figure the table shows."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import DataError
from ..significance import SAMPLES, Comparison, Measure, paired_bootstrap
from ..tasks.base import EvalCall
from ..tasks.registry import task_of
from .plan import PlannedRow, by_row, reference_name
from .run import row_outputs, row_run

Say = Callable[[str], None]


def compare_rows(rows: list[PlannedRow], reference: str | None, say: Say, samples: int = SAMPLES
                 ) -> dict[str, dict[str, Comparison]]:
    """Row name → split → the row's BLEU (its task's headline) against the reference row's, for every row whose
    runs (and the reference's) have all finished and scored the split; empty before the reference has."""
    groups, name = by_row(rows), reference_name(rows, reference)
    base = groups.get(name, [])
    results = [p.result() for p in base]
    if not base or any(r is None for r in results):
        return {}
    out: dict[str, dict[str, Comparison]] = {}
    for split in [s for s in base[0].splits if all(s in r.scores for r in results if r is not None)]:
        measure = _headline(base[0], split)
        theirs = [measure.statistics(row_outputs(p, split, say), p.title) for p in base]
        for row, planned in groups.items():
            if row == name or any((r := p.result()) is None or split not in r.scores for p in planned):
                continue
            try:
                ours = [measure.statistics(row_outputs(p, split, say), p.title) for p in planned]
            except DataError as e:
                say(f"{row}: not compared with {name} on {split}: {e}")
                continue
            out.setdefault(row, {})[split] = paired_bootstrap(measure, ours, theirs, samples)
    return out


def _headline(planned: PlannedRow, split: str) -> Measure:
    """The table's metric (``Task.headline``: sacreBLEU's cased BLEU of a translation) against the split's
    references."""
    run = row_run(planned)
    task = task_of(run.spec)
    return next(m for m in task.measures(run, EvalCall(split=split)) if m.key == task.headline[0])
