"""A study's best trial against its runner-up: paired bootstrap resampling (sacreBLEU's test,
``engine/significance.py``) of the objective's metric on the validation outputs both trials' scoring kept
(``eval_valid.out``, a parser's ``eval_valid.trees``), for the report. It says whether the study's choice is
a difference that validation can tell apart from the luck of its sentences."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import TbuildError
from ..run.directory import resolve_run
from ..significance import SAMPLES, Comparison, paired_bootstrap, summary
from ..tasks.base import EvalCall
from ..tasks.registry import task_of
from .spec import Study


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
        best, second = (resolve_run(Path(t.user_attrs.get("folder", ""))) for t in trials)
        task = task_of(best.spec)
        measure = next((m for m in task.measures(best, EvalCall(split="valid")) if m.key == metric), None)
        if measure is None:
            return f"not compared: {task.what} has no statistics per sentence of {metric} to resample"
        outputs = [task.kept_outputs(run, "valid") for run in (best, second)]
        if None in outputs:
            return (f"not compared: trial {trials[outputs.index(None)].number} kept no validation outputs (scored "
                    "before tbuild kept them; `tbuild evaluate TRIAL_FOLDER --split valid` keeps them)")
        ours, theirs = (measure.statistics(o or [], f"trial {t.number}") for o, t in zip(outputs, trials, strict=True))
        return paired_bootstrap(measure, [ours], [theirs], samples)
    except TbuildError as e:
        return f"not compared: {e}"


def runner_up_section(study: Study, optuna_study: Any) -> str:
    """The report's paragraph on the best trial against the runner-up (nothing before two trials completed)."""
    found = best_against_runner_up(study, optuna_study)
    if found is None:
        return ""
    first, second = (t.number for t in ranked(study, optuna_study)[:2])
    head = f"\n**Best against the runner-up** (trial {first} − trial {second}, validation): "
    if isinstance(found, str):
        return head + found + "\n"
    verdict = "significant (p < 0.05)" if found.significant else "not significant (p ≥ 0.05): validation does not " \
        "tell them apart"
    return (head + f"{summary(found)}; {verdict}. sacreBLEU's paired bootstrap, {found.samples:,} resamples of the "
            f"validation sentences (seed {found.seed}); the interval is that of the difference.\n")
