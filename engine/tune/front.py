"""A two-objective study's Pareto front (the validation metric and the decode time of ``speed``): the
complete trials no other complete trial beats on both, as a table (each row a spec: the fields that
differ between them) and a plot for the report, and the one line printed after each trial."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .spec import Study

FRONT_PNG = "front.png"


def two_objectives(optuna_study: Any) -> bool:
    return len(optuna_study.directions) > 1


def front_trials(optuna_study: Any) -> list[Any]:
    """The complete trials on the Pareto front, fastest first: Optuna's ``best_trials``, those no other
    complete trial matches on both objectives while beating on one."""
    return sorted(optuna_study.best_trials, key=lambda t: t.values[1])


def so_far(optuna_study: Any) -> str:
    """The study's standing after a trial: its best (one objective) or its front (two), or nothing yet."""
    if two_objectives(optuna_study):
        front = front_trials(optuna_study)
        return "; front so far: trials " + ", ".join(str(t.number) for t in front) if front else ""
    try:
        best = optuna_study.best_trial
    except ValueError:  # no complete trial yet
        return ""
    return f"; best so far: trial {best.number}, {best.value:.4g}"


def values_text(trial: Any, study: Study) -> str:
    """A finished trial's objective values in words ("" where it has none: pruned, failed)."""
    values = trial.values or []
    if len(values) == 1:
        return f" {values[0]:.4g}"
    if len(values) == 2:
        return f" {study.spec.objective.metric} {values[0]:.4g}, decode {values[1]:.3g} s"
    return ""


def front_table(study: Study, optuna_study: Any) -> list[list[str]]:
    """The front as rows (a header first): trial, the metric, decode seconds, sentences per second, and
    the spec fields whose values differ between the front's trials (all of them for a front of one)."""
    front = front_trials(optuna_study)
    values = [t.user_attrs.get("values", {}) for t in front]
    keys = list(dict.fromkeys(k for v in values for k in v))
    if len(front) > 1:
        keys = [k for k in keys if len({json.dumps(v.get(k)) for v in values}) > 1]
    head = ["trial", study.spec.objective.metric, "decode s", "sentences/s", *keys]
    rows = [head]
    for trial, point in zip(front, values, strict=True):
        timing = trial.user_attrs.get("decode", {})
        name = f"{trial.number} (base)" if trial.user_attrs.get("baseline") else str(trial.number)
        rows.append([name, f"{trial.values[0]:.4g}", f"{trial.values[1]:.3g}",
                     f"{timing.get('sentences_per_second', 0.0):.1f}",
                     *("(base)" if k not in point else _cell(point[k]) for k in keys)])
    return rows


def _cell(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else json.dumps(value)


def front_section(study: Study, optuna_study: Any) -> list[str]:
    """The report's Pareto-front section: what was timed, the table, the plot, how to take a spec."""
    speed = study.spec.speed
    if speed is None:
        return []
    table = front_table(study, optuna_study)
    lines = ["", "## Pareto front", "",
             f"Decode seconds: the median of {speed.repeats} decodes of "
             f"{f'the first {speed.lines} lines' if speed.lines else 'the whole split'} of validation on this "
             "machine, as `tbuild decode` decodes them (each trial's decode section). A trial is on the front where "
             "no other complete trial is at least as good on both objectives and better on one."]
    if len(table) == 1:
        return [*lines, "", "No complete trial yet."]
    lines += ["", "| " + " | ".join(table[0]) + " |", "|" + "---|" * len(table[0])]
    lines += ["| " + " | ".join(row) + " |" for row in table[1:]]
    lines += ["", f"![front]({FRONT_PNG})", "",
              f"A point as a spec: `tbuild tune {study.path} --trial N -o spec.yaml`; every point: `--front`."]
    return lines


def front_plot(study: Study, optuna_study: Any, folder: Path) -> list[Path]:
    """``front.png`` (``figures/plots.py``): every complete trial, the front joined; nothing before one."""
    from optuna.trial import TrialState

    from ..figures.plots import plot_front

    complete = optuna_study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        return []
    on_front = {t.number for t in front_trials(optuna_study)}
    points = [{"trial": t.number, "value": t.values[0], "seconds": t.values[1], "front": t.number in on_front,
               "baseline": bool(t.user_attrs.get("baseline"))} for t in complete]
    return [plot_front(points, study.spec.objective.metric, folder / FRONT_PNG)]
