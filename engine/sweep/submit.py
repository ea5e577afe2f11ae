"""Run a sweep's rows as one job each through submitit (Slurm on a cluster, its local executor
elsewhere): the ``submitit`` extra. Each job plans its row again from the sweep file, so only names
travel to the cluster."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from ..device.process import ProcessSettings
from ..errors import TbuildError
from ..extras import require
from .plan import PlannedRow, plan
from .spec import load_sweep


def row_job(sweep_file: str, row: str, seed: int | None, overrides: list[str], cwd: str,
            configure: Callable[[PlannedRow], ProcessSettings]) -> str:
    """One run of a row (its ``seed``'s), trained and scored in a job (a fresh process on some machine); returns
    the row's name. ``configure``: the entry point's process settings for the row (``tbuild sweep`` passes its
    own)."""
    import os

    from .run import run_row

    os.chdir(cwd)  # the sweep's relative paths mean what they meant where it was submitted
    (planned,) = [p for p in plan(load_sweep(Path(sweep_file)), overrides, [row]) if p.seed == seed]
    process = configure(planned)

    def log(kind: str, data: dict[str, Any]) -> None:
        if kind in ("log", "valid", "end", "info", "warning"):
            print(kind, {k: v for k, v in data.items() if not isinstance(v, dict)}, flush=True)

    if run_row(planned, log, lambda line: print(line, flush=True), process.after_batch, process.after_step).interrupted:
        raise TbuildError(f"row {planned.title}: interrupted; submit the sweep again to resume it")
    return row


def parameters(settings: list[str]) -> dict[str, Any]:
    """``--slurm KEY=VALUE`` settings (values read as YAML) for ``executor.update_parameters``."""
    out = {}
    for text in settings:
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise TbuildError(f"--slurm {text}: expected KEY=VALUE, e.g. slurm_partition=gpu or gpus_per_node=8")
        out[key] = yaml.safe_load(value)
    return out


def require_submitit() -> ModuleType:
    """The submitit package, or the one-line error naming its extra (``--launcher submitit`` of sweep and tune)."""
    return require("submitit", "tbuild[submitit]", "--launcher submitit")


def run_submitit(sweep_file: Path, rows: list[PlannedRow], overrides: list[str], settings: list[str],
                 say: Callable[[str], None], configure: Callable[[PlannedRow], ProcessSettings],
                 cluster: str | None = None) -> bool:
    """Submit every unfinished row and wait for them all; True when all finished. ``configure``: what
    each job's process runs first (``row_job``), a module-level function so that it travels by name."""
    submitit = require_submitit()
    todo = [p for p in rows if not p.finished]
    for p in rows:
        if p.finished:
            say(f"{p.title}: finished earlier ({p.folder}), skipped")
    if not todo:
        return True
    folder = todo[0].folder.parent / "submitit"
    executor = submitit.AutoExecutor(folder=folder, cluster=cluster)
    executor.update_parameters(name=f"tbuild-{todo[0].folder.parent.name}", **parameters(settings))
    cwd = str(Path.cwd())
    jobs = [(p, executor.submit(row_job, str(sweep_file.resolve()), p.row.name, p.seed, overrides, cwd,
                                       configure)) for p in todo]
    for p, job in jobs:
        say(f"{p.title}: submitted as job {job.job_id} ({executor.cluster}; logs in {folder})")
    failed = []
    for p, job in jobs:
        try:
            job.result()
            say(f"{p.title}: finished")
        except Exception as e:  # noqa: BLE001 - a failed job is reported and the others awaited
            failed.append(p.title)
            say(f"{p.title}: job {job.job_id} failed: {str(e).strip().splitlines()[-1] if str(e).strip() else e}")
    return not failed
