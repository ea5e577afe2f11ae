"""One trial of a study: a normal tbuild run directory trained with the trial's values, each validation
reported to the pruner, then scored on the validation split (and, with ``speed``, its decoding timed).
Its ``trial.json`` says how it ended.

A trial that is tried again (its worker was killed, or Ctrl-C stopped it) trains in the same folder as
the first try, so it resumes from that run's last checkpoint."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..device.process import ProcessSettings
from ..errors import TbuildError
from ..files import atomic_write
from ..run.directory import EvalRecord, Run, resolve_run
from ..training.run import train_spec
from ..training.trainer import Event
from .front import so_far
from .spec import Speed, Study
from .workers import TRIAL_FILE, claim, read_trial

FOLDER_OF = "folder_trial"  # user attribute: the trial whose folder a try trains in (a retry: the first)
INTERRUPTED = "interrupted"  # user attribute: Ctrl-C stopped the try (optuna's state says failed)
SEEDS_FOLDER = "seeds"  # a trial's runs of its other seeds: TRIAL_FOLDER/seeds/seed-S
SEEDS_FILE = "seeds.json"  # each seed's value, their mean and standard deviation


class Interrupted(Exception):  # noqa: N818 - not a TbuildError: a failed trial is one, and the study goes on
    """Ctrl-C stopped a trial at a step boundary; the same command resumes it."""


@dataclass
class TrialRun:
    """What one trial needs from its caller: the study, the emit for its training events, a line printer,
    and the entry point's process settings (housekeeping between steps and batches, threads to time with)."""

    study: Study
    emit_for: Callable[[int, dict[str, Any]], Event]
    say: Callable[[str], None]
    process: ProcessSettings

    def __call__(self, trial: Any) -> float | tuple[float, float]:  # optuna.Trial -> the objectives' values
        """Optuna's objective: train, report, score on validation (and, with ``speed``, time the decoding),
        holding the trial folder's worker lock throughout (``workers.py``)."""
        from .space import suggest

        values = suggest(self.study.spec.space, trial)
        number = folder_number(trial)
        folder = self.study.folder / "trials" / f"trial-{number:03d}"
        lock = claim(trial, folder)
        try:
            for key, value in ((FOLDER_OF, number), ("values", values), ("folder", str(folder))):
                trial.set_user_attr(key, value)
            self.say(f"trial {trial.number}: " + (", ".join(f"{k}={_short(v)}" for k, v in values.items())
                                                  or "the base")
                     + (f" (resuming trial {number}'s run)" if number != trial.number else "")
                     + so_far(trial.study))
            record = TrialRecord(folder, self.study.name, trial.number, number, values)
            return self._run(trial, record, _Watch(trial, record, self.emit_for(trial.number, values), self.study))
        finally:
            lock.release()

    def _run(self, trial: Any, record: TrialRecord, watch: _Watch) -> float | tuple[float, float]:
        """Train the trial's run, score it (and time its decoding); record how it ended, however it ends."""
        import optuna

        folder, number = record.path.parent, record.data["folder_trial"]
        try:
            loaded = self.study.load(record.data["values"], _trial_overrides(self.study, folder, number))
            record.write("running")
            result = train_spec(loaded, watch, after_step=self.process.after_step)
            if result["reason"] == "interrupted":
                trial.study.enqueue_trial(trial.params, user_attrs={FOLDER_OF: number})
                record.write("interrupted", steps=result["step"], minutes=result["elapsed"] / 60)
                trial.set_user_attr(INTERRUPTED, True)  # optuna marks it failed; the report says interrupted
                raise Interrupted(f"trial {trial.number} interrupted at step {result['step']}; run the same "
                                  "command to resume it")
            watch.step, watch.minutes = result["step"], result["elapsed"] / 60
            run = resolve_run(folder)  # the run's fitted spec (tags, vocabulary), as trained
            value = score(run, self.study)
            timed = self._timed(trial, run)
        except optuna.TrialPruned as e:
            watch.emit("stopped", {"why": str(e)})  # the display closes what the trainer's end would have
            record.write("pruned", steps=watch.step, minutes=watch.minutes)
            _attrs(trial, watch.step, watch.minutes)
            raise
        except Interrupted:
            raise
        except BaseException as e:
            error = (str(e).strip() or type(e).__name__).splitlines()[0][:300]
            watch.emit("stopped", {"why": f"failed: {error}"})
            if folder.is_dir():
                record.write("failed", steps=watch.step, minutes=watch.minutes, error=error)
            trial.set_user_attr("error", error)
            _attrs(trial, watch.step, watch.minutes)
            raise
        _attrs(trial, watch.step, watch.minutes)
        extra = {} if timed is None else {"decode": timed}
        record.write("complete", steps=watch.step, minutes=watch.minutes, value=value, **extra)
        return value if timed is None else (value, timed["seconds"])

    def _timed(self, trial: Any, run: Run) -> dict[str, Any] | None:
        """With ``speed``: the trial's decoding timed (``decode_time``), kept in the trial; else None."""
        speed = self.study.spec.speed
        if speed is None:
            return None
        timed = decode_time(run, speed, self.study.spec.objective.weights == "average", self.process)
        trial.set_user_attr("decode", timed)
        return timed


def state_of(trial: Any) -> str:
    """A trial's state in words: optuna's (complete, pruned, fail, running, waiting), except a try that
    Ctrl-C stopped, which optuna records as failed and tbuild calls interrupted."""
    return "interrupted" if trial.user_attrs.get(INTERRUPTED) else trial.state.name.lower()


def folder_number(trial: Any) -> int:
    """The trial whose folder this one trains in: itself, or the first try of a trial tried again (a
    retry carries the user attributes of the try it repeats)."""
    return int(trial.user_attrs.get(FOLDER_OF, trial.number))


def _trial_overrides(study: Study, folder: Path, number: int) -> list[str]:
    """The trial's name, folder, budget, and the validations the pruner hears (the objective's metric)."""
    objective, budget = study.spec.objective, study.spec.budget
    out = [f"name={json.dumps(f'{study.name}-trial-{number}')}", f"output_dir={json.dumps(str(folder))}",
           f"train.select.metric={objective.metric}", f"train.select.lines={json.dumps(objective.lines)}",
           f"train.select.beam={objective.beam}"]
    if budget.trial_steps is not None:
        out.append(f"train.max_steps={budget.trial_steps}")
    if budget.trial_minutes is not None:
        out.append(f"train.max_minutes={budget.trial_minutes}")
    return out + ([f"train.seed={study.seeds[0]}"] if study.seeds else [])  # the other seeds: ``seeds_mean``


class _Watch:
    """The training events of a trial: passed on to the display, each validation's score reported to
    the pruner (which may stop the trial there: ``optuna.TrialPruned`` out of the trainer). A two-objective
    study reports nothing to Optuna (it prunes one objective only): a ``threshold`` pruner's floor is
    checked here instead."""

    def __init__(self, trial: Any, record: TrialRecord, emit: Event, study: Study) -> None:
        self.trial, self.record, self.emit, self.study = trial, record, emit, study
        self.step, self.minutes = 0, 0.0

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        import optuna

        self.emit(kind, data)
        if kind == "log":
            self.step, self.minutes = data["step"], data["elapsed"] / 60
        if kind != "valid":
            return
        value = data.get("score", data["ppl"])
        self.step = data["step"]
        self.record.report(self.step, value)
        if self.study.spec.speed is None:
            self.trial.report(value, self.step)
            if self.trial.should_prune():
                raise optuna.TrialPruned(f"trial {self.trial.number} pruned at step {self.step} (validation "
                                         f"{value:.4g})")
        elif below_floor(self.study, self.step, value):
            raise optuna.TrialPruned(f"trial {self.trial.number} pruned at step {self.step} (validation {value:.4g}, "
                                     f"beyond the threshold {self.study.pruner.threshold:g})")


def below_floor(study: Study, step: int, value: float) -> bool:
    """Whether a two-objective study's ``threshold`` pruner stops a trial whose validation at ``step`` is
    ``value``: worse than the threshold (below it where higher is better), after ``warmup_steps``."""
    pruner = study.pruner
    if pruner.kind != "threshold" or pruner.threshold is None or step < pruner.warmup_steps:
        return False
    return value < pruner.threshold if study.spec.objective.maximize else value > pruner.threshold


def _attrs(trial: Any, steps: int, minutes: float) -> None:
    trial.set_user_attr("steps", steps)
    trial.set_user_attr("train_minutes", round(minutes, 3))


def decode_time(run: Run, speed: Speed, average: bool, process: ProcessSettings) -> dict[str, Any]:
    """The finished trial's decoding timed as ``speed`` says (the task's own decode of the validation
    lines with its best or ``average``d weights, the median of the repeats, with ``speed.threads``), as
    ``DecodeTime.to_json`` writes it."""
    from ..tasks.base import DecodeTiming
    from ..tasks.registry import task_of

    timing = DecodeTiming(speed.lines, speed.repeats, average, process.after_batch)
    with process.using_threads(speed.threads):
        return task_of(run.spec).decode_time(run, timing).to_json()


def score(run: Run, study: Study) -> float:
    """The finished trial's objective on the validation split, decoded as its spec's decode section says,
    with its best or averaged weights (``objective.weights``); kept in the run as ``eval_valid.json``."""
    from ..tasks.registry import task_of

    objective = study.spec.objective
    result = task_of(run.spec).study_record(run, average=objective.weights == "average")
    run.dir.write_eval(result)
    value = metric_of(result, objective.metric)
    return value if run.dir.path.parent.name == SEEDS_FOLDER else seeds_mean(run, study, value)


def metric_of(result: EvalRecord, metric: str) -> float:
    """``metric`` read from an evaluation record (f1: EVALB's, all lengths)."""
    if metric == "ppl":
        return result.perplexity
    if metric == "f1":
        if result.all is None:
            raise TbuildError("objective f1 needs a parsing spec (a treebank data set)")
        return float(result.all["f1"])
    value = getattr(result, metric)
    if value is None:
        raise TbuildError(f"objective {metric}: the evaluation has no such score (a parsing run has f1)")
    return float(value)


class TrialRecord:
    """``trial.json`` in the trial's run folder: its study, numbers, values, state and validations."""

    def __init__(self, folder: Path, study: str, number: int, folder_trial: int, values: dict[str, Any]) -> None:
        self.path = folder / TRIAL_FILE
        old = read_trial(folder) or {}
        self.data: dict[str, Any] = {"study": study, "trial": number, "folder_trial": folder_trial,
                                     "values": values, "state": "running",
                                     "validations": old.get("validations", {})}

    def report(self, step: int, value: float) -> None:
        self.data["validations"][str(step)] = value
        self.write(self.data["state"])

    def write(self, state: str, **fields: Any) -> None:
        self.data.update(state=state, **fields)
        atomic_write(self.path, (json.dumps(self.data, indent=1) + "\n").encode())


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else json.dumps(value)


def seed_runs(folder: Path, study: Study) -> list[Path]:
    """The run folders of a trial's seeds: the trial's own (the first seed), then one per other seed."""
    return [folder, *(folder / SEEDS_FOLDER / f"seed-{seed}" for seed in (study.seeds or [])[1:])]


def seeds_mean(run: Run, study: Study, first: float) -> float:
    """A study with ``seeds``: the trial's other seeds trained (each an ordinary run in ``seed_runs``, its training
    not displayed; Ctrl-C fails the trial) and scored as the first was; the mean of their values, kept with each
    value and their standard deviation in ``seeds.json``. Without seeds: ``first``."""
    import statistics

    if not study.seeds or len(study.seeds) == 1:
        return first
    record = read_trial(run.dir.path) or {}
    values = {study.seeds[0]: first}
    for seed, folder in zip(study.seeds[1:], seed_runs(run.dir.path, study)[1:], strict=True):
        extra = [*_trial_overrides(study, run.dir.path, int(record.get("folder_trial", 0))),
                 f"output_dir={json.dumps(str(folder))}", f"train.seed={seed}"]
        result = train_spec(study.load(record.get("values", {}), extra), lambda kind, data: None)
        if result["reason"] == "interrupted":
            raise Interrupted(f"{run.dir.path}: seed {seed} interrupted at step {result['step']}; the trial counts "
                              f"as failed (its runs are kept in {run.dir.path})")
        values[seed] = score(resolve_run(folder), study)
    mean = statistics.fmean(values.values())
    atomic_write(run.dir.path / SEEDS_FILE, (json.dumps({"values": values, "mean": mean, "sd": statistics.stdev(
        values.values())}, indent=1) + "\n").encode())
    return mean


def read_seeds(folder: Path) -> dict[str, Any] | None:
    """A trial folder's ``seeds.json`` (its seeds' values, mean and standard deviation), or None."""
    try:
        return json.loads((folder / SEEDS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
