"""Run a sweep's rows on this machine, one after another: train (resuming an interrupted row), then
score the development and test splits; a finished row is skipped."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..decoding.native import NativeEngine
from ..run.directory import Run, RunDir
from ..training.run import train_spec
from ..training.trainer import Event
from .plan import PlannedRow
from .result import RowResult, SplitScores, write_result

Say = Callable[[str], None]


@dataclass(frozen=True)
class RowOutcome:
    row: PlannedRow
    interrupted: bool


def run_row(planned: PlannedRow, emit: Event, say: Say, after_batch: Callable[[], None] = lambda: None,
            after_step: Callable[[int], None] = lambda step: None) -> RowOutcome:
    """Train one row to its budget and score it (``sweep_row.json``, and each split's outputs); stop early
    on Ctrl-C."""
    from ..decoding.native import load_native_engine

    started = time.monotonic()
    result = train_spec(planned.loaded, emit, after_step=after_step)
    if result["reason"] == "interrupted":
        return RowOutcome(planned, True)
    from ..tasks.registry import task_of

    run = row_run(planned)
    translator = load_native_engine(run)  # best.safetensors: Table 3 averages no checkpoints (§6.2)
    key, name = task_of(run.spec).headline
    scores: dict[str, SplitScores] = {}
    for split in planned.splits:
        if getattr(run.spec.data, split) is None:
            continue
        scores[split] = score_split(run, translator, split, after_batch)
        say(f"{planned.title}: {split} {name} {scores[split][key]:.2f}, perplexity {scores[split]['ppl']:.2f}")
    write_result(planned.folder, RowResult(planned.row.name, planned.row.label, result["step"], result["elapsed"] / 60,
                                           (time.monotonic() - started) / 60, planned.params, scores, planned.seed))
    return RowOutcome(planned, bool(result.get("stop_requested")))  # Ctrl-C on the row's last step: stop after it


def row_run(planned: PlannedRow) -> Run:
    return Run(planned.loaded.spec, RunDir(planned.folder))


def score_split(run: Run, translator: NativeEngine, split: str, after_batch: Callable[[], None] = lambda: None
                ) -> SplitScores:
    """A row's scores on ``split`` as its task scores it (``Task.scores``, and the perplexity); its outputs kept in
    its folder (``eval_SPLIT.out``) for the table's comparisons with the reference row."""
    from ..tasks.registry import task_of

    task = task_of(run.spec)
    evaluation, hyps = task.split_record(run, translator, split, after_batch)
    task.keep_outputs(run, split, hyps)
    return {key: float(getattr(evaluation, key)) for key in task.scores} | {"ppl": evaluation.perplexity}


def row_outputs(planned: PlannedRow, split: str, say: Say) -> list[str]:
    """A finished row's outputs on ``split`` as its scoring kept them; a row scored before outputs were kept is
    decoded again (its best checkpoint, as when it was scored)."""
    from ..decoding.native import load_native_engine
    from ..tasks.registry import task_of

    run = row_run(planned)
    kept = task_of(run.spec).kept_outputs(run, split)
    if kept is None:
        say(f"{planned.title}: decoding {split} again (its outputs were not kept)")
        score_split(run, load_native_engine(run), split)
        kept = task_of(run.spec).kept_outputs(run, split) or []
    return kept


def run_local(rows: list[PlannedRow], emit_for: Callable[[PlannedRow], Event], say: Say,
              after_batch: Callable[[], None] = lambda: None,
              after_step: Callable[[int], None] = lambda step: None,
              before_row: Callable[[PlannedRow], object] = lambda row: None) -> bool:
    """Every unfinished row in order; False when one was interrupted (the rest are left for the
    next call, which resumes that row). ``before_row``: the entry point's process settings for a
    row (its threads; the rows of one sweep may differ), called before it trains."""
    for planned in rows:
        if planned.finished:
            say(f"{planned.title}: finished earlier ({planned.folder}), skipped")
            continue
        say(f"{planned.title}: training in {planned.folder} ({planned.budget()})")
        before_row(planned)
        if run_row(planned, emit_for(planned), say, after_batch, after_step).interrupted:
            return False
    return True
