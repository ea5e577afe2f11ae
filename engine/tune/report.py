"""A study's report in its folder: the trials (values, objective, steps, minutes, state) as Markdown
and CSV, the best trial, the parameters' importances, and Optuna's matplotlib plots (optimization
history, parallel coordinates, importances); a two-objective study's Pareto front (``front.py``); and
any trial (the best, a point of the front) as a self-contained spec."""

from __future__ import annotations

import csv
import io
import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..errors import TbuildError
from ..files import atomic_write
from .significance import significance_section
from .spec import Study
from .trial import state_of
from .workers import read_trial


@dataclass(frozen=True)
class TrialRow:
    number: int
    state: str
    value: float | None
    values: dict[str, Any]
    steps: int | None
    minutes: float | None
    folder: str
    baseline: bool = False
    decode: dict[str, Any] | None = None  # a two-objective study's decode time (``speed``)


def trial_rows(optuna_study: Any) -> list[TrialRow]:
    """Every trial of the study, in order (a trial tried again names the folder it resumed)."""
    rows = []
    for t in optuna_study.get_trials(deepcopy=False):
        a = t.user_attrs
        rows.append(TrialRow(t.number, state_of(t), t.values[0] if t.values else None, a.get("values", {}),
                             a.get("steps"), a.get("train_minutes"), a.get("folder", ""), bool(a.get("baseline")),
                             a.get("decode")))
    return rows


def best_trial(optuna_study: Any) -> Any | None:
    """The best complete trial, or None before one completed (and in a two-objective study: its front)."""
    try:
        return optuna_study.best_trial
    except (ValueError, RuntimeError):  # no complete trial; several objectives
        return None


def importances(optuna_study: Any) -> dict[str, float] | None:
    """Optuna's parameter importances (its default evaluator, PED-ANOVA, over the complete trials), or
    None where they cannot be computed (fewer than two complete trials, or no parameter that varied)."""
    import optuna

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "importances will be equal" with few trials: the table shows it
            return optuna.importance.get_param_importances(optuna_study)
    except (ValueError, RuntimeError):
        return None


def write_report(study: Study, optuna_study: Any) -> list[Path]:
    """``report.md``, ``trials.csv`` and the PNG plots in the study folder; returns what it wrote."""
    folder = study.folder
    rows = trial_rows(optuna_study)
    keys = list(dict.fromkeys(k for r in rows for k in r.values))
    table = [["trial", "state", study.spec.objective.metric, *_speed_head(study), *keys, "steps", "minutes",
              "folder"]]
    table += [[r.number, r.state, _num(r.value), *_speed_cells(study, r), *(_cell(r.values.get(k)) for k in keys),
               r.steps or "", _num(r.minutes), r.folder] for r in rows]
    out = io.StringIO()
    csv.writer(out).writerows(table)
    written = [folder / "trials.csv"]
    atomic_write(written[0], out.getvalue().encode())
    weights = importances(optuna_study)
    shown = [table[0]] + [[f"{row[0]} (base)" if r.baseline else row[0], *row[1:]]
                          for r, row in zip(rows, table[1:], strict=True)]
    page = (markdown(study, shown, best_trial(optuna_study), weights) + significance_section(study, optuna_study)
            + _front_lines(study, optuna_study))  # a one-objective study's comparison, a two-objective one's front
    atomic_write(folder / "report.md", page.encode())
    written.append(folder / "report.md")
    return written + _plots(optuna_study, folder, weights is not None) + _front_plot(study, optuna_study)


def _speed_head(study: Study) -> list[str]:
    """A two-objective study's decode-time columns."""
    return ["decode_s", "sentences_per_s"] if study.spec.speed else []


def _speed_cells(study: Study, row: TrialRow) -> list[str]:
    if not study.spec.speed:
        return []
    timing = row.decode or {}
    return [_num(timing.get("seconds")), _num(timing.get("sentences_per_second"))]


def _front_lines(study: Study, optuna_study: Any) -> str:
    """The Pareto front's section of the report (a two-objective study's; else nothing)."""
    from .front import front_section

    return "".join(line + "\n" for line in front_section(study, optuna_study))


def _front_plot(study: Study, optuna_study: Any) -> list[Path]:
    from .front import front_plot

    return front_plot(study, optuna_study, study.folder) if study.spec.speed else []


def markdown(study: Study, table: list[list[Any]], best: Any | None, weights: dict[str, float] | None) -> str:
    """The report page: the study, the trials, the best and what mattered."""
    objective = study.spec.objective
    speed = " and decode seconds on this machine (minimize)" if study.spec.speed else ""
    lines = [f"# Study {study.name}", "",
             f"Base spec `{study.base.name}`; objective: validation {objective.metric} "
             f"({'maximize' if objective.maximize else 'minimize'}){speed}, weights {objective.weights}; "
             f"sampler {study.spec.sampler.kind}, pruner {study.pruner.kind}. Test was never scored.", "",
             "| " + " | ".join(map(str, table[0])) + " |", "|" + "---|" * len(table[0])]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in table[1:]]
    if best is not None:
        values = best.user_attrs.get("values", {})
        lines += ["", f"**Best**: trial {best.number}, {objective.metric} {best.value:.4g}: "
                  + ", ".join(f"`{k}={json.dumps(v)}`" for k, v in values.items())]
    if weights:
        lines += ["", "**Importances** (PED-ANOVA): " + ", ".join(f"`{k}` {v:.2f}" for k, v in weights.items())]
    return "\n".join(lines) + "\n"


def _plots(optuna_study: Any, folder: Path, with_importances: bool) -> list[Path]:
    """Optuna's matplotlib plots, each where it can be drawn (a complete trial; importances: two)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as plots

    drawn = []
    makers = [("history.png", plots.plot_optimization_history), ("parallel.png", plots.plot_parallel_coordinate)]
    if with_importances:
        makers.append(("importances.png", plots.plot_param_importances))
    if best_trial(optuna_study) is None:
        return drawn
    for name, make in makers:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # Optuna's "experimental" and matplotlib's flat-axis notes
                ax = make(optuna_study)
        except (ValueError, RuntimeError):
            continue
        figure = ax.figure if hasattr(ax, "figure") else ax.flat[0].figure
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
        plt.close(figure)
        atomic_write(folder / name, buffer.getvalue())
        drawn.append(folder / name)
    return drawn


def best_spec(study: Study, optuna_study: Any, destination: Path) -> str:
    """The best trial as a self-contained spec (``trial_spec``); a two-objective study has a front instead."""
    from .front import two_objectives

    if two_objectives(optuna_study):
        raise TbuildError(f"study {study.name} has two objectives and no single best: --front writes each spec "
                          f"of its Pareto front, --trial N -o FILE one of them (the report's table lists them)")
    best = best_trial(optuna_study)
    if best is None:
        raise TbuildError(f"study {study.name}: no complete trial yet; run `tbuild tune {study.path}` first")
    return trial_spec(study, best, destination, "The best trial", f"{study.name}-best")


def chosen_trial(study: Study, optuna_study: Any, number: int) -> Any:
    """Trial ``number`` of the study, complete (a spec is written of a finished one only)."""
    trials = {t.number: t for t in optuna_study.get_trials(deepcopy=False)}
    if number not in trials:
        raise TbuildError(f"--trial {number}: study {study.name} has no such trial (it has {len(trials)}; the report "
                          "lists them)")
    trial = trials[number]
    if trial.state.name != "COMPLETE":
        raise TbuildError(f"--trial {number}: the trial is {state_of(trial)}, not complete")
    return trial


def trial_spec(study: Study, trial: Any, destination: Path, what: str, name: str) -> str:
    """A complete trial as a self-contained spec named ``name`` (the base, the study's ``set``, the trial's
    values; the base's budget, not the trial's), its data paths relative to ``destination``'s folder;
    headed by a comment naming it (``what``), the study, the trial and its scores."""
    values = trial.user_attrs.get("values", {})
    loaded = study.load(values)
    data = loaded.spec.model_dump(mode="json", exclude={"extends", "output_dir"})
    data["name"] = name
    _relative_paths(data, destination.resolve().parent)
    record = read_trial(Path(trial.user_attrs.get("folder", ""))) or {}
    decode = trial.user_attrs.get("decode")
    speed = (f", decode {decode['seconds']:.3g} s ({decode['sentences_per_second']:.1f} sentences/s)"
             if decode else "")
    head = [f"# {what} of study {study.name} ({study.path}): trial {trial.number}, validation "
            f"{study.spec.objective.metric} {trial.values[0]:.4g}{speed} after {record.get('steps', '?')} steps.",
            "# Values: " + ", ".join(f"{k}={json.dumps(v)}" for k, v in values.items()),
            "# Chosen on validation only; train it and score test once: tbuild train / tbuild evaluate --split test."]
    return "\n".join(head) + "\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def front_specs(study: Study, optuna_study: Any, folder: Path) -> list[Path]:
    """Each trial of the Pareto front as a spec file in ``folder`` (``trial-NNN.yaml``)."""
    from .front import front_trials, two_objectives

    if not two_objectives(optuna_study):
        raise TbuildError(f"--front: study {study.name} has one objective (add a speed section for a front); "
                          "--best writes its best trial")
    front = front_trials(optuna_study)
    if not front:
        raise TbuildError(f"study {study.name}: no complete trial yet; run `tbuild tune {study.path}` first")
    written = []
    for trial in front:
        path = folder / f"trial-{trial.number:03d}.yaml"
        text = trial_spec(study, trial, path, "A point of the Pareto front", f"{study.name}-trial-{trial.number}")
        atomic_write(path, text.encode())
        written.append(path)
    return written


def _relative_paths(spec: dict[str, Any], folder: Path) -> None:
    """The spec's absolute paths made relative to ``folder``, as a spec file's are."""
    from tbuild.builder.loader import map_paths

    map_paths(spec, lambda value: os.path.relpath(value, folder) if os.path.isabs(value) else value)


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.4g}"


def _cell(value: Any) -> str:
    return "" if value is None else (f"{value:.4g}" if isinstance(value, float) else json.dumps(value))
