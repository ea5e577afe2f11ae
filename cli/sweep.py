"""`tbuild sweep`: train and score a sweep's rows (the paper's Table 3), then print its table."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from .common import console, guarded
from .options import SET_OPTION
from .progress import Reporter

if TYPE_CHECKING:
    from tbuild.engine.device.process import ProcessSettings
    from tbuild.engine.sweep.plan import PlannedRow


@guarded
def sweep(
    file: Path = typer.Argument(..., help="A sweep file (specs/sweeps/*.yaml): a base spec and rows of overrides."),
    set_: list[str] = SET_OPTION,
    only: str | None = typer.Option(None, "--only", help="Comma-separated row names to run (default: all)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate every row and print the plan; train nothing."),
    launcher: str = typer.Option("local", "--launcher", help="local: the rows one after another here; submitit: "
                                 "one job per row through submitit (Slurm on a cluster; the submitit extra)."),
    cluster: str | None = typer.Option(None, "--cluster", help="With --launcher submitit: slurm, local or debug "
                                       "(default: Slurm where it is installed, else local processes)."),
    slurm: list[str] = typer.Option(None, "--slurm", help="With --launcher submitit: KEY=VALUE for submitit's "
                                    "update_parameters, e.g. slurm_partition=gpu, gpus_per_node=8, timeout_min=600."),
) -> None:
    """Validate every row, print the plan, then train and score each unfinished row in its own run
    directory (row name and spec hash); re-running skips finished rows and resumes an interrupted one.
    Ends with the table (results.md, .csv, .json and .png in the sweep's folder)."""
    from tbuild.engine.device.process import configure_process
    from tbuild.engine.errors import TbuildError
    from tbuild.engine.sweep import table
    from tbuild.engine.sweep.plan import plan, reference_name
    from tbuild.engine.sweep.run import run_local
    from tbuild.engine.sweep.significance import compare_rows
    from tbuild.engine.sweep.spec import load_sweep
    from tbuild.engine.sweep.submit import require_submitit

    if launcher not in ("local", "submitit"):
        raise TbuildError(f"--launcher {launcher!r}: choose local or submitit")
    if launcher == "submitit" and not dry_run:
        require_submitit()
    sweep_file = load_sweep(file)
    rows = plan(sweep_file, list(set_ or []), only.split(",") if only else None)
    _print_plan(sweep_file.name, rows)
    if dry_run:
        return
    process = configure_process()

    def say(line: str) -> None:
        console.print(f"[bold]sweep[/] {line}", highlight=False, soft_wrap=True)

    if launcher == "submitit":
        from tbuild.engine.sweep.submit import run_submitit

        completed = run_submitit(file, rows, list(set_ or []), list(slurm or []), say, row_process, cluster)
    else:
        # after_step trims the heap that configure_process keeps (without it resident memory grows a few GB a row)
        completed = run_local(rows, lambda _: Reporter(), say, process.after_batch, process.after_step,
                              before_row=row_process)
    compared = compare_rows(rows, sweep_file.spec.reference, say)
    results = table.results(rows, sweep_file.spec.reference, compared)
    written = table.write(sweep_file.folder, results)
    _print_results(sweep_file.name, results)
    trends = table.group_trends(results)
    if trends:
        console.print("paper's trends: " + "; ".join(f"{label}: {held}" for label, held in trends.items()),
                      highlight=False)
    if compared:
        console.print(f"Δ: a row's BLEU − the reference row's ({reference_name(rows, sweep_file.spec.reference)}), "
                      "95%: its interval, p: sacreBLEU's paired bootstrap on the rows' outputs (1,000 resamples; "
                      "several seeds: their mean on each resample); p < 0.05: significant", highlight=False)
    console.print(f"[dim]wrote {', '.join(str(p) for p in written)}[/]", highlight=False, soft_wrap=True)
    if not completed and launcher == "submitit":
        raise TbuildError("some rows failed (above); run the same command to resume them")
    if not completed:
        console.print("interrupted: run the same command to resume the row and go on", highlight=False)
        raise typer.Exit(130)


def row_process(planned: PlannedRow) -> ProcessSettings:
    """A row's process settings, as `tbuild train` sets them: its train.threads, else every core. Run
    before each row here, and first in each submitit job's process (it travels there by name)."""
    from tbuild.engine.device.process import configure_process

    return configure_process(planned.loaded.spec.train.threads)


def _print_plan(name: str, rows: list[PlannedRow]) -> None:
    from tbuild.engine.sweep.plan import minutes_left

    left = minutes_left(rows)
    estimate = f", about {left / 60:.1f} h of training left" if left else ""
    grid = Table(title=f"sweep {name}: {len(rows)} rows{estimate}", title_justify="left")
    for column in ("row", "label", "params", "MFLOP/token", "budget", "state"):
        grid.add_column(column, justify="right" if column in ("params", "MFLOP/token") else "left")
    for p in rows:
        state = "finished" if p.finished else ("started" if (p.folder / "spec.yaml").exists() else "to train")
        grid.add_row(p.title, p.row.label, f"{p.params / 1e6:.1f}M", f"{p.flops_per_token / 1e6:.1f}",
                     p.budget(), state)
    console.print(grid)


def _print_results(name: str, results: list[dict]) -> None:
    """The results as a table where the console is wide enough for it, else (a log, a pipe, a narrow
    terminal) as the Markdown table of results.md, one line per row, never squeezed."""
    from rich.measure import Measurement

    from tbuild.engine.sweep.table import cell, columns, markdown

    grid = Table(title=f"sweep {name}: results", title_justify="left")
    shown = columns(results)
    for column in shown:
        grid.add_column(column)
    for row in results:
        grid.add_row(*(cell(row[c], c) for c in shown))
    if Measurement.get(console, console.options.update_width(10**6), grid).maximum <= console.width:
        console.print(grid)
        return
    console.print(f"sweep {name}: results", highlight=False, soft_wrap=True)
    console.print(markdown(results), end="", markup=False, highlight=False, soft_wrap=True)
