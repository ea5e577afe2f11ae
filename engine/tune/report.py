"""A study's report in its folder: the trials (values, objective, steps, minutes, state) as Markdown
and CSV, the best trial, the parameters' importances, and Optuna's matplotlib plots (optimization
history, parallel coordinates, importances); and the best trial as a self-contained spec."""

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
from .trial import read_trial, state_of


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


def trial_rows(optuna_study: Any) -> list[TrialRow]:
    """Every trial of the study, in order (a trial tried again names the folder it resumed)."""
    rows = []
    for t in optuna_study.get_trials(deepcopy=False):
        a = t.user_attrs
        rows.append(TrialRow(t.number, state_of(t), t.value, a.get("values", {}), a.get("steps"),
                             a.get("train_minutes"), a.get("folder", ""), bool(a.get("baseline"))))
    return rows


def best_trial(optuna_study: Any) -> Any | None:
    """The best complete trial, or None before one completed."""
    try:
        return optuna_study.best_trial
    except ValueError:
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
    table = [["trial", "state", study.spec.objective.metric, *keys, "steps", "minutes", "folder"]]
    table += [[r.number, r.state, _num(r.value), *(_cell(r.values.get(k)) for k in keys), r.steps or "",
               _num(r.minutes), r.folder] for r in rows]
    out = io.StringIO()
    csv.writer(out).writerows(table)
    written = [folder / "trials.csv"]
    atomic_write(written[0], out.getvalue().encode())
    weights = importances(optuna_study)
    shown = [table[0]] + [[f"{row[0]} (base)" if r.baseline else row[0], *row[1:]]
                          for r, row in zip(rows, table[1:], strict=True)]
    page = markdown(study, shown, best_trial(optuna_study), weights) + significance_section(study, optuna_study)
    atomic_write(folder / "report.md", page.encode())
    written.append(folder / "report.md")
    return written + _plots(optuna_study, folder, weights is not None)


def markdown(study: Study, table: list[list[Any]], best: Any | None, weights: dict[str, float] | None) -> str:
    """The report page: the study, the trials, the best and what mattered."""
    objective = study.spec.objective
    lines = [f"# Study {study.name}", "",
             f"Base spec `{study.base.name}`; objective: validation {objective.metric} "
             f"({'maximize' if objective.maximize else 'minimize'}), weights {objective.weights}; "
             f"sampler {study.spec.sampler.kind}, pruner {study.spec.pruner.kind}. Test was never scored.", "",
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
    """The best trial as a self-contained spec (the base, the study's ``set``, the trial's values; the
    base's budget, not the trial's), its data paths relative to ``destination``'s folder; headed by a
    comment naming the study and the trial."""
    best = best_trial(optuna_study)
    if best is None:
        raise TbuildError(f"study {study.name}: no complete trial yet; run `tbuild tune {study.path}` first")
    values = best.user_attrs.get("values", {})
    loaded = study.load(values)
    data = loaded.spec.model_dump(mode="json", exclude={"extends", "output_dir"})
    data["name"] = f"{study.name}-best"
    _relative_paths(data, destination.resolve().parent)
    record = read_trial(Path(best.user_attrs.get("folder", ""))) or {}
    head = [f"# The best trial of study {study.name} ({study.path}): trial {best.number}, validation "
            f"{study.spec.objective.metric} {best.value:.4g} after {record.get('steps', '?')} steps.",
            "# Values: " + ", ".join(f"{k}={json.dumps(v)}" for k, v in values.items()),
            "# Chosen on validation only; train it and score test once: tbuild train / tbuild evaluate --split test."]
    return "\n".join(head) + "\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _relative_paths(spec: dict[str, Any], folder: Path) -> None:
    """The spec's absolute paths made relative to ``folder``, as a spec file's are."""
    from tbuild.builder.loader import map_paths

    map_paths(spec, lambda value: os.path.relpath(value, folder) if os.path.isabs(value) else value)


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.4g}"


def _cell(value: Any) -> str:
    return "" if value is None else (f"{value:.4g}" if isinstance(value, float) else json.dumps(value))
