"""Workers of a study as submitit jobs (Slurm on a cluster, its local executor elsewhere): each job
loads the study file again and runs trials against the shared storage until the budget is spent."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..device.process import ProcessSettings
from ..errors import TbuildError
from ..sweep.submit import parameters, require_submitit
from .spec import Study, load_study


def worker_job(study_file: str, storage: str, cwd: str, configure: Callable[[Study], ProcessSettings]) -> str:
    """One worker in a job (a fresh process, maybe on another machine): trials until the budget is spent;
    returns why it stopped. ``configure``: the entry point's process settings (it travels by name)."""
    import os

    from .study import open_study, optimize
    from .trial import TrialRun

    os.chdir(cwd)  # the study's relative paths mean what they meant where it was submitted
    study = load_study(Path(study_file))
    process = configure(study)

    def log(kind: str, data: dict[str, Any]) -> None:
        if kind in ("valid", "end", "warning"):
            print(kind, {k: v for k, v in data.items() if not isinstance(v, dict)}, flush=True)

    def say(line: str) -> None:
        print(line, flush=True)

    objective = TrialRun(study, lambda number, values: log, say, process)
    return optimize(study, open_study(study, storage), objective, say)


def run_workers(study: Study, storage: str, workers: int, settings: list[str], say: Callable[[str], None],
                configure: Callable[[Study], ProcessSettings], cluster: str | None = None) -> None:
    """Submit ``workers`` jobs sharing ``storage`` and wait for them all."""
    submitit = require_submitit()
    folder = study.folder / "submitit"
    executor = submitit.AutoExecutor(folder=folder, cluster=cluster)
    executor.update_parameters(name=f"tbuild-tune-{study.name}", **parameters(settings))
    cwd = str(Path.cwd())
    jobs = [executor.submit(worker_job, str(study.path.resolve()), storage, cwd, configure) for _ in range(workers)]
    say(f"{workers} workers submitted ({executor.cluster}; logs in {folder}): "
        + ", ".join(job.job_id for job in jobs))
    failed = []
    for job in jobs:
        try:
            say(f"worker {job.job_id} stopped: {job.result()}")
        except Exception as e:  # noqa: BLE001 - a failed worker is reported and the others awaited
            failed.append(job.job_id)
            text = str(e).strip()
            say(f"worker {job.job_id} failed: {text.splitlines()[-1] if text else type(e).__name__}")
    if failed:
        raise TbuildError(f"workers {', '.join(failed)} failed (above); run the same command to go on with the study")
