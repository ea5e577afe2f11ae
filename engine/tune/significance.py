"""A study's best trial against its runner-up: paired bootstrap resampling (sacreBLEU's test,
``engine/significance.py``) of the objective's metric on the validation outputs both trials' scoring kept
(``eval_valid.out``, a parser's ``eval_valid.trees``), for the report. It says whether the study's choice is
a difference that validation can tell apart from the luck of its sentences."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import TbuildError
from ..run.directory import resolve_run
from ..significance import SAMPLES, Comparison, paired_bootstrap, summary
from ..tasks.base import EvalCall
from ..tasks.registry import task_of
from .spec import Study
from .trial import read_seeds, seed_runs


def ranked(study: Study, optuna_study: Any) -> list[Any]:
    """The complete trials of a one-objective study, best first (none for a study of several objectives)."""
    done = [t for t in optuna_study.get_trials(deepcopy=False)
            if t.state.name == "COMPLETE" and t.values is not None and len(t.values) == 1]
    return sorted(done, key=lambda t: t.values[0], reverse=study.spec.objective.maximize)


def best_against_runner_up(study: Study, optuna_study: Any, samples: int = SAMPLES) -> Comparison | str | None:
    """The best trial's metric against the runner-up's on the validation outputs they kept; a sentence saying
    why not where they cannot be compared; None before two trials completed."""
    trials = ranked(study, optuna_study)[:2]
    if len(trials) < 2:
        return None
    metric = study.spec.objective.metric
    if metric == "ppl":
        return "not compared: perplexity has no statistics per sentence here to resample"
    try:
        runs = [[resolve_run(f) for f in seed_runs(Path(t.user_attrs.get("folder", "")), study)] for t in trials]
        task = task_of(runs[0][0].spec)
        measure = next((m for m in task.measures(runs[0][0], EvalCall(split="valid")) if m.key == metric), None)
        if measure is None:
            return f"not compared: {task.what} has no statistics per sentence of {metric} to resample"
        stats: list[list[np.ndarray]] = [[], []]
        for side, trial, found in zip(stats, trials, runs, strict=True):
            for run in found:
                outputs = task.kept_outputs(run, "valid")
                if outputs is None:
                    return (f"not compared: trial {trial.number} kept no validation outputs in {run.dir.path} (scored "
                            "before tbuild kept them; `tbuild evaluate FOLDER --split valid` keeps them)")
                side.append(measure.statistics(outputs, f"trial {trial.number}"))
        return paired_bootstrap(measure, stats[0], stats[1], samples)
    except TbuildError as e:
        return f"not compared: {e}"


def significance_section(study: Study, optuna_study: Any) -> str:
    """The report's paragraphs on chance: each trial's mean and standard deviation over its seeds (a study with
    ``seeds``), and the best trial against the runner-up (once two trials completed)."""
    return _seeds_lines(study, optuna_study) + _runner_up_lines(study, optuna_study)


def _runner_up_lines(study: Study, optuna_study: Any) -> str:
    found = best_against_runner_up(study, optuna_study)
    if found is None:
        return ""
    first, second = (t.number for t in ranked(study, optuna_study)[:2])
    pooled = f", the mean over seeds {', '.join(map(str, study.seeds or []))}" if len(study.seeds or []) > 1 else ""
    head = f"\n**Best against the runner-up** (trial {first} − trial {second}, validation{pooled}): "
    if isinstance(found, str):
        return head + found + "\n"
    verdict = "significant (p < 0.05)" if found.significant else "not significant (p ≥ 0.05): validation does not " \
        "tell them apart"
    unit = " (in points of %, the objective's 0-1 scaled)" if study.spec.objective.metric == "accuracy" else ""
    return (head + f"{summary(found)}{unit}; {verdict}. sacreBLEU's paired bootstrap, {found.samples:,} resamples of "
            f"the validation sentences (seed {found.seed}); the interval is that of the difference.\n")


def _seeds_lines(study: Study, optuna_study: Any) -> str:
    """Each complete trial's value as the mean ± standard deviation over its seeds (``seeds.json``)."""
    if len(study.seeds or []) < 2:
        return ""
    cells = []
    for t in ranked(study, optuna_study):
        kept = read_seeds(Path(t.user_attrs.get("folder", "")))
        if kept is not None:
            cells.append(f"trial {t.number} {kept['mean']:.4g} ± {kept['sd']:.2g}")
    seeds = ", ".join(map(str, study.seeds or []))
    return (f"\n**Seeds** {seeds}: each trial's {study.spec.objective.metric} is the mean over them "
            f"(± their standard deviation): {'; '.join(cells) or 'no complete trial yet'}.\n")
