"""``tbuild evaluate RUN --against RUN2``: both systems (a run or an ensemble each) evaluated on the same split as
their task evaluates them, then each of the task's metrics compared by paired bootstrap resampling on the
outputs the evaluations kept (``engine/significance.py``: sacreBLEU's test); the comparison is printed and
written into the first system's evaluation record (``comparison``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import TbuildError
from ..significance import SAMPLES, SEED, Comparison, paired_bootstrap, signed
from .base import EvalCall, Report, Table
from .registry import task_of

if TYPE_CHECKING:
    from ..run.directory import Run


@dataclass(frozen=True)
class Side:
    """One system of a comparison: its name as the command line gave it, its runs (several: an ensemble) and
    how it is evaluated."""

    name: str
    runs: list[Run]
    call: EvalCall


def evaluate_against(mine: Side, theirs: Side, samples: int = SAMPLES, seed: int | None = SEED) -> Report:
    """Evaluate ``mine`` and ``theirs`` (each report headed by its name), then compare every metric of their task,
    ``mine`` − ``theirs``, by ``samples`` paired resamples; writes the comparison into ``mine``'s record."""
    task, other = task_of(mine.runs[0].spec), task_of(theirs.runs[0].spec)
    if other.name != task.name:
        raise TbuildError(f"--against: {theirs.name} is {other.what} and {mine.name} {task.what}; compare two "
                          "systems of one task")
    if samples < 1:
        raise TbuildError(f"--bootstrap {samples}: give a number of resamples of at least 1 (sacreBLEU's: 1000)")
    measures = task.measures(mine.runs[0], mine.call)  # a task without them refuses before anything decodes
    report: Report = [f"[bold]{mine.name}[/]", *task.evaluate(mine.runs, mine.call)]
    split = mine.call.src.name if mine.call.src is not None else mine.call.split
    outputs, record = task.kept_outputs(mine.runs[0], split), mine.runs[0].dir.read_eval(split)
    report += [f"[bold]{theirs.name}[/] (--against)", *other.evaluate(theirs.runs, theirs.call)]
    against = other.kept_outputs(theirs.runs[0], split)
    if outputs is None or against is None or record is None:
        raise TbuildError(f"--against: the evaluations of {split} kept no outputs to compare")
    found = [paired_bootstrap(m, [m.statistics(outputs, mine.name)], [m.statistics(against, theirs.name)],
                              samples, seed) for m in measures]
    task.keep_outputs(mine.runs[0], split, outputs)  # theirs may share the folder (a checkpoint of the same run)
    kept = record.model_copy(update={"comparison": {
        "against": theirs.name, "samples": samples, "seed": seed, "sentences": len(outputs),
        "metrics": {c.metric: c.to_json() for c in found}}})
    path = mine.runs[0].dir.write_eval(kept)
    return [*report, comparison_table(found, mine.name, theirs.name, split, len(outputs)),
            f"difference = {mine.name} − {theirs.name}; its 95% interval: the middle 95% of the resampled "
            f"differences; p: how often resampling gives a difference as large when there is none (sacreBLEU's "
            f"paired bootstrap, {samples:,} resamples, seed {seed}); *: p < 0.05, significant",
            f"[dim]wrote the comparison into {path}[/]"]


def comparison_table(found: list[Comparison], mine: str, theirs: str, split: str, sentences: int) -> Table:
    """Each metric: both systems' scores with their resampled mean ± half the 95% interval (as sacreBLEU prints
    them), the difference, its 95% interval and p-value."""
    table = Table(f"{mine} against {theirs} on {split} ({sentences:,} sentences, paired bootstrap)",
                  ("metric", mine, theirs, "difference", "95% interval", "p"), right=(1, 2, 3, 4, 5))
    for c in found:
        spread = c.difference_spread
        table.add(c.metric, _scored(c.system, c.system_spread.mean, c.system_spread.ci),
                  _scored(c.baseline, c.baseline_spread.mean, c.baseline_spread.ci),
                  signed(c.difference) + (" *" if c.significant else ""),
                  f"{signed(spread.lower)} to {signed(spread.upper)}", f"{c.p_value:.4f}")
    return table


def _scored(score: float, mean: float, ci: float) -> str:
    return f"{score:.2f} (μ {mean:.2f} ± {ci:.2f})"
