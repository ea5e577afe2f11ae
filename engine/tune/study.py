"""The Optuna study behind a study file: its storage (a SQLite file in the study folder unless a URL is
given), sampler, pruner and direction; and the loop that runs trials until the budget is spent.

Workers (several `tbuild tune` processes, here or on other machines through ``--storage``) share the
study through its storage. A running trial whose worker died (``kill -9``) is failed by the next worker
to look and tried again, resuming its run folder, ``storage.retries`` times: at once where the worker ran
on the same machine (its lock is free), else once its heartbeat is stale (``workers.py``)."""

from __future__ import annotations

import itertools
import logging
import time
import warnings
from collections.abc import Callable
from typing import Any

from ..errors import TbuildError
from ..extras import require
from .front import so_far, values_text
from .spec import Study
from .trial import state_of
from .workers import Workers, retry_callback

STUDY_DB = "study.db"


def _optuna() -> Any:
    optuna = require("optuna", "tbuild[tune]", "tbuild tune")
    optuna.logging.set_verbosity(logging.ERROR)  # trials are said by tbuild, failures in one line
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)  # heartbeats, retries
    return optuna


def storage_url(study: Study, url: str | None = None) -> str:
    """``url``, or the SQLite file in the study folder."""
    return url or f"sqlite:///{(study.folder / STUDY_DB).resolve()}"


def open_study(study: Study, url: str | None = None) -> Any:
    """The Optuna study of ``study`` in its storage, created on the first call, loaded on the next ones."""
    optuna = _optuna()
    from optuna.storages import RDBStorage

    url = storage_url(study, url)
    if url.startswith("sqlite:///"):
        study.folder.mkdir(parents=True, exist_ok=True)
    cfg = study.spec.storage
    for attempt in itertools.count():
        try:
            storage = RDBStorage(url, engine_kwargs=_engine_kwargs(url), heartbeat_interval=cfg.heartbeat_seconds,
                                 grace_period=2 * cfg.heartbeat_seconds,
                                 heartbeat_stale_trial_callback=retry_callback(study))
            created = optuna.create_study(study_name=study.name, storage=storage, sampler=sampler(study),
                                          pruner=pruner(study), directions=study.directions, load_if_exists=True)
            _baseline(study, created)
            return created
        except (ImportError, ValueError) as e:  # an unknown database driver, a URL it cannot read, another direction
            raise TbuildError(f"--storage {url}: {str(e).strip().splitlines()[0]}{_directions_hint(e)}") from None
        except Exception as e:  # noqa: BLE001 - SQLAlchemy's errors are not exported here
            # another worker created the tables (OperationalError: "table ... already exists") or the study
            # (IntegrityError) at the same time: both are the schema race, which a retry resolves
            race = "IntegrityError" in type(e).__name__ or "already exists" in str(e)
            if race and attempt < 4:
                time.sleep(0.5 * (attempt + 1))
                continue
            raise TbuildError(f"storage {url}: {type(e).__name__}: {str(e).strip().splitlines()[0]}") from None


def _directions_hint(error: Exception) -> str:
    """What to do where the stored study has other objectives than the file (a speed section added or removed)."""
    if "direction" not in str(error):
        return ""
    return ("; the stored study has other objectives than the study file (a speed section added or removed?): "
            "give the study another name, or move its folder away")


def _baseline(study: Study, optuna_study: Any) -> None:
    """A new study's first trial: the base spec's own values (``baseline``; the grid sampler has its own order)."""
    from .space import base_values

    if not study.spec.baseline or study.spec.sampler.kind == "grid" or optuna_study.get_trials(deepcopy=False):
        return
    params = base_values(study.spec.space, study.load({}).spec.model_dump(mode="json"))
    if params:
        optuna_study.enqueue_trial(params, user_attrs={"baseline": True})


def _engine_kwargs(url: str) -> dict[str, Any]:
    # SQLite: wait for another process's write instead of failing at once ("database is locked")
    return {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}


def sampler(study: Study) -> Any:
    """The study file's sampler (TPE, random, or a grid over the choices and int ranges)."""
    samplers = _optuna().samplers
    cfg = study.spec.sampler
    if cfg.kind == "random":
        return samplers.RandomSampler(seed=cfg.seed)
    if cfg.kind == "grid":
        space = {}
        for key, param in study.spec.space.items():
            if param.same_as is None:
                values = param.grid()
                scalar = all(v is None or isinstance(v, bool | int | float | str) for v in values)
                space[key] = values if scalar else list(range(len(values)))  # as space.py asks for them
        return samplers.GridSampler(space, seed=cfg.seed)
    if cfg.kind == "nsga2":
        return samplers.NSGAIISampler(population_size=cfg.population, seed=cfg.seed)
    return samplers.TPESampler(seed=cfg.seed, n_startup_trials=cfg.startup_trials)  # two objectives: MOTPE


def pruner(study: Study) -> Any:
    """The study file's pruner; steps are training steps (each validation reports one). Two objectives:
    none in Optuna (its pruners compare one value; a threshold is checked by the trial itself)."""
    pruners = _optuna().pruners
    cfg, maximize = study.pruner, study.spec.objective.maximize
    if study.spec.speed is not None:
        return pruners.NopPruner()
    first = cfg.min_steps or study.load({}).spec.train.validate_every
    if cfg.kind == "median":
        return pruners.MedianPruner(n_startup_trials=cfg.startup_trials, n_warmup_steps=cfg.warmup_steps)
    if cfg.kind == "successive_halving":
        return pruners.SuccessiveHalvingPruner(min_resource=first, reduction_factor=cfg.reduction_factor)
    if cfg.kind == "hyperband":
        top = study.spec.budget.trial_steps or "auto"
        return pruners.HyperbandPruner(min_resource=first, max_resource=top, reduction_factor=cfg.reduction_factor)
    if cfg.kind == "threshold":
        bound = {"lower": cfg.threshold} if maximize else {"upper": cfg.threshold}
        return pruners.ThresholdPruner(**bound, n_warmup_steps=cfg.warmup_steps)
    return pruners.NopPruner()


def budget_spent(study: Study, optuna_study: Any, workers: Workers) -> str | None:
    """Why no further trial starts (the trials or minutes of the budget are spent; the grid is done),
    counting every worker's trials; None while there is budget left. A dead worker's trial is failed and
    retried first (``workers.settle``); where the budget is reached only by counting running trials whose
    workers cannot be checked, this waits until their heartbeat says whether they are alive."""
    while True:
        alive, unknown = workers.settle(optuna_study)
        why, counts_running = _spent(study, optuna_study, len(alive) + len(unknown))
        if why is None or not counts_running:
            return why
        if not unknown:
            return f"{why} ({workers.under_way(alive)})"
        workers.wait(unknown)


def _spent(study: Study, optuna_study: Any, running: int) -> tuple[str | None, bool]:
    """Why the budget is spent (None: it is not), and whether that counts trials still running. Trials
    count complete or pruned (a failed one is retried, or replaced); a queued retry goes first."""
    optuna = _optuna()
    from optuna.trial import TrialState

    trials = optuna_study.get_trials(deepcopy=False)
    if any(t.state == TrialState.WAITING for t in trials):
        return None, False
    budget = study.spec.budget
    done = sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials)
    if budget.trials is not None and done >= budget.trials:
        return f"the budget's {budget.trials} trials are done", False
    if budget.trials is not None and done + running >= budget.trials:
        return f"the budget's {budget.trials} trials are done or under way", True
    spent = sum(float(t.user_attrs.get("train_minutes", 0.0)) for t in trials)
    if budget.minutes is not None and spent >= budget.minutes:
        return f"the budget's {budget.minutes:g} training minutes are spent ({spent:.1f})", False
    sampler = optuna_study.sampler
    if isinstance(sampler, optuna.samplers.GridSampler) and sampler.is_exhausted(optuna_study):
        return "every point of the grid is tried", False
    return None, False


def optimize(study: Study, optuna_study: Any, objective: Callable[[Any], Any],
             say: Callable[[str], None]) -> str:
    """Run trials one at a time until the budget is spent; returns why it stopped. A trial that fails
    for its own reason (a spec its values make invalid, a model that does not fit) is reported and the
    study goes on; Ctrl-C (``Interrupted``) and errors of the study itself stop it."""
    from tbuild.builder import SpecError

    def told(optuna_study: Any, trial: Any) -> None:
        say(describe(trial, optuna_study, study))

    workers = Workers(study, say)
    while (why := budget_spent(study, optuna_study, workers)) is None:
        optuna_study.optimize(objective, n_trials=1, callbacks=[told],
                              catch=(TbuildError, SpecError, ValueError, RuntimeError))
    return why


def describe(trial: Any, optuna_study: Any, study: Study) -> str:
    """A finished trial in one line, with the study's best so far (two objectives: its Pareto front)."""
    state = state_of(trial)
    steps = trial.user_attrs.get("steps")
    at = f" at step {steps}" if steps is not None else ""
    line = f"trial {trial.number} {state}{values_text(trial, study)}{at}"
    if state == "fail":
        line += f": {trial.user_attrs.get('error', 'see its folder for why')}"
    return line + so_far(optuna_study)
