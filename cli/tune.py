"""`tbuild tune`: an adaptive search (Optuna) over a spec's fields, scored on validation; its report,
and its best trial as a spec."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from .common import console, guarded
from .progress import Reporter

if TYPE_CHECKING:
    import optuna

    from tbuild.engine.device.process import ProcessSettings
    from tbuild.engine.tune.spec import Study


@guarded
def tune(
    file: Path = typer.Argument(..., help="A study file (specs/tune/*.yaml): base spec, space, objective, budget."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate the study and print its plan; train nothing."),
    storage: str | None = typer.Option(None, "--storage", help="The study's database URL, shared by workers on "
                                       "many machines (postgresql://..., mysql://...); default: a SQLite file "
                                       "in the study folder."),
    best: bool = typer.Option(False, "--best", help="Write the best trial as a self-contained spec (-o), train "
                              "nothing."),
    trial: int | None = typer.Option(None, "--trial", min=0, help="Write this complete trial as a self-contained "
                                     "spec (-o), train nothing: e.g. a point of a two-objective study's front."),
    front: bool = typer.Option(False, "--front", help="Write each trial of the Pareto front (a study with speed) as "
                               "a spec into the folder -o (default: the study folder's front/), train nothing."),
    output: Path | None = typer.Option(None, "-o", "--output", help="With --best or --trial: the spec file "
                                       "(default: stdout); with --front: the folder."),
    report: bool = typer.Option(False, "--report", help="Write the report (table, importances, plots), train "
                                "nothing."),
    launcher: str = typer.Option("local", "--launcher", help="local: trials one after another in this process; "
                                 "submitit: --workers jobs through submitit (Slurm on a cluster)."),
    workers: int = typer.Option(1, "--workers", min=1, help="With --launcher submitit: how many workers."),
    cluster: str | None = typer.Option(None, "--cluster", help="With --launcher submitit: slurm, local or debug."),
    slurm: list[str] = typer.Option(None, "--slurm", help="With --launcher submitit: KEY=VALUE for submitit's "
                                    "update_parameters, e.g. slurm_partition=gpu, timeout_min=600."),
) -> None:
    """Validate the study (every value of its space against the spec's schema), then run trials until its
    budget is spent: each a run directory in the study folder, reported to the pruner at each validation,
    scored on validation. Running the same command again continues the study. Ends with the report."""
    from tbuild.engine.errors import TbuildError
    from tbuild.engine.sweep.submit import require_submitit
    from tbuild.engine.tune.spec import load_study
    from tbuild.engine.tune.study import open_study, storage_url

    if launcher not in ("local", "submitit"):
        raise TbuildError(f"--launcher {launcher!r}: choose local or submitit")
    if best + front + (trial is not None) > 1:
        raise TbuildError("--best, --trial and --front each write specs: give one of them")
    if launcher == "submitit" and not (dry_run or best or report or front or trial is not None):
        require_submitit()
    study = load_study(file)
    url = storage_url(study, storage)
    if dry_run:
        _print_plan(study, url)
        return
    if best or report or front or trial is not None:
        _outputs(study, open_study(study, storage), _Export(best, trial, front, output))
        return
    optuna_study = open_study(study, storage)  # first: a missing Optuna or a bad storage is the only line
    _print_plan(study, url)
    optuna_study.set_user_attr("study_file", str(file.resolve()))
    _run(study, optuna_study, url, launcher, workers, cluster, list(slurm or []))
    _outputs(study, optuna_study, _Export())


def _run(study: Study, optuna_study: optuna.Study, url: str, launcher: str, workers: int, cluster: str | None,
         slurm: list[str]) -> None:
    """The trials, here or as submitit workers; Ctrl-C stops at a step boundary (exit 130)."""
    from tbuild.engine.tune.study import optimize
    from tbuild.engine.tune.trial import Interrupted, TrialRun

    def say(line: str) -> None:
        console.print(f"[bold]tune[/] {line}", highlight=False, soft_wrap=True)

    if launcher == "submitit":
        from tbuild.engine.tune.submit import run_workers

        run_workers(study, url, workers, slurm, say, study_process, cluster)
        return
    process = study_process(study)
    objective = TrialRun(study, lambda number, values: Reporter(), say, process)
    try:
        say(f"stopped: {optimize(study, optuna_study, objective, say)}")
    except Interrupted as e:
        say(str(e))
        _outputs(study, optuna_study, _Export())
        raise typer.Exit(130) from None


def study_process(study: Study) -> ProcessSettings:
    """The process settings of a study's trials, as `tbuild train` sets them (the base's train.threads,
    else every core); first in each submitit worker too (it travels there by name)."""
    from tbuild.engine.device.process import configure_process

    return configure_process(study.load({}).spec.train.threads)


@dataclass(frozen=True)
class _Export:
    """What the command writes besides the report: the best trial's spec, trial N's, or the front's."""

    best: bool = False
    trial: int | None = None
    front: bool = False
    output: Path | None = None


def _outputs(study: Study, optuna_study: optuna.Study, export: _Export) -> None:
    """The report (always), what it found, and a spec asked for (--best, --trial, --front)."""
    from tbuild.engine.tune.front import two_objectives
    from tbuild.engine.tune.report import importances, write_report

    written = write_report(study, optuna_study)
    if export.best or export.trial is not None or export.front:
        _write_specs(study, optuna_study, export)
        return
    if two_objectives(optuna_study):
        _print_front(study, optuna_study)
    else:
        _print_best(study, optuna_study)
    weights = importances(optuna_study)
    if weights:
        console.print("importances: " + ", ".join(f"{k} {v:.2f}" for k, v in weights.items()), highlight=False)
    console.print(f"[dim]wrote {', '.join(str(p) for p in written)}[/]", highlight=False, soft_wrap=True)


def _write_specs(study: Study, optuna_study: optuna.Study, export: _Export) -> None:
    """--front: each point's spec in a folder; --best or --trial N: one spec, to -o or stdout."""
    from tbuild.engine.files import atomic_write
    from tbuild.engine.tune.report import best_spec, chosen_trial, front_specs, trial_spec

    if export.front:
        for path in front_specs(study, optuna_study, export.output or study.folder / "front"):
            console.print(f"wrote {path}", highlight=False)
        return
    destination = export.output or Path("best.yaml")
    if export.trial is not None:
        chosen = chosen_trial(study, optuna_study, export.trial)
        text = trial_spec(study, chosen, destination, "Trial", f"{study.name}-trial-{chosen.number}")
    else:
        text = best_spec(study, optuna_study, destination)
    if export.output is None:
        console.print(text, end="", markup=False, highlight=False, soft_wrap=True)
    else:
        atomic_write(export.output, text.encode())
        console.print(f"wrote {export.output}", highlight=False)


def _print_best(study: Study, optuna_study: optuna.Study) -> None:
    from tbuild.engine.tune.report import best_trial

    top = best_trial(optuna_study)
    if top is not None:
        values = ", ".join(f"{k}={v}" for k, v in top.user_attrs.get("values", {}).items())
        console.print(f"[bold]best[/]: trial {top.number}, {study.spec.objective.metric} {top.value:.4g} ({values})",
                      highlight=False, soft_wrap=True)


def _print_front(study: Study, optuna_study: optuna.Study) -> None:
    """A two-objective study's Pareto front as a table (each row a spec: --trial N -o FILE writes it)."""
    from tbuild.engine.tune.front import front_table

    rows = front_table(study, optuna_study)
    if len(rows) == 1:
        return
    table = Table(title="Pareto front (validation; --trial N -o FILE writes a point's spec, --front all)",
                  title_justify="left")
    for column in rows[0]:
        table.add_column(column)
    for row in rows[1:]:
        table.add_row(*row)
    console.print(table)


def _print_plan(study: Study, url: str) -> None:
    """The space, the objective, the budget, sampler, pruner and storage."""
    spec = study.spec
    grid = Table(title=f"study {study.name}: {len(spec.space)} parameters", title_justify="left")
    for column in ("parameter", "searched as", "when"):
        grid.add_column(column)
    for key, p in spec.space.items():
        how = {"float": f"float {p.float}", "int": f"int {p.int}", "choice": f"one of {p.choice}",
               "same_as": f"= {p.same_as}"}[p.kind]
        how += (" log" if p.log else "") + (f" step {p.step:g}" if p.step else "")
        grid.add_row(key, how, ", ".join(f"{k} in {v}" for k, v in p.when.items()))
    console.print(grid)
    b, o = spec.budget, spec.objective
    per_trial = ", ".join(x for x in (f"{b.trial_steps:,} steps" if b.trial_steps else "",
                                      f"{b.trial_minutes:g} min" if b.trial_minutes else "") if x) or "the base's stops"
    study_budget = ", ".join(x for x in (f"{b.trials} trials" if b.trials else "",
                                         f"{b.minutes:g} training minutes" if b.minutes else "") if x)
    heard = ("the whole validation split's loss pass" if o.metric in ("accuracy", "ppl")  # nothing decoded
             else f"{o.lines or 'all'} lines at beam {o.beam}")
    lines = [f"objective: validation {o.metric}, {'maximize' if o.maximize else 'minimize'} ({o.weights} weights; "
             + (f"the pruner hears {heard} at each validation)" if study.pruner.kind != "none" else
                f"each validation scores {heard} to pick the best weights; no pruner)"), *_speed_plan(study),
             f"budget: {study_budget}; each trial {per_trial}",
             f"sampler: {spec.sampler.kind} (seed {spec.sampler.seed}); pruner: {study.pruner.kind}",
             f"storage: {url}", f"trials in: {study.folder / 'trials'}"]
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)


def _speed_plan(study: Study) -> list[str]:
    """The decode-time objective in a line (none without one)."""
    speed = study.spec.speed
    if speed is None:
        return []
    base = study.load({}).spec
    lines = f"the first {speed.lines} validation lines" if speed.lines else "the whole validation split"
    threads = speed.threads or base.train.threads or "every core"
    return [f"second objective: decode seconds, minimize: the median of {speed.repeats} decodes of {lines} as "
            f"`tbuild decode` runs them (beam {base.decode.beam}, alpha {base.decode.alpha:g}, "
            f"{base.decode.precision} precision, {base.decode.quantization}; threads: {threads}); the result: a "
            "Pareto front"]
