"""The Optuna study behind a study file: its storage (a SQLite file in the study folder unless a URL is
given), sampler, pruner and direction; and the loop that runs trials until the budget is spent.

Workers (several `tbuild tune` processes, here or on other machines through ``--storage``) share the
study through its storage. A running trial writes a heartbeat; one whose worker died (``kill -9``) is
marked failed by the next worker and tried again, resuming its run folder, ``storage.retries`` times."""

from __future__ import annotations

import itertools
import logging
import time
import warnings
from collections.abc import Callable
from typing import Any

from ..errors import TbuildError
from ..extras import require
from .spec import Study
from .trial import state_of

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
    from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback

    url = storage_url(study, url)
    if url.startswith("sqlite:///"):
        study.folder.mkdir(parents=True, exist_ok=True)
    cfg = study.spec.storage
    retry = (RetryHeartbeatStaleTrialCallback(max_retry=cfg.retries, inherit_intermediate_values=True)
             if cfg.retries else None)
    direction = "maximize" if study.spec.objective.maximize else "minimize"
    for attempt in itertools.count():
        try:
            storage = RDBStorage(url, engine_kwargs=_engine_kwargs(url), heartbeat_interval=cfg.heartbeat_seconds,
                                 grace_period=2 * cfg.heartbeat_seconds, heartbeat_stale_trial_callback=retry)
            created = optuna.create_study(study_name=study.name, storage=storage, sampler=sampler(study),
                                          pruner=pruner(study), direction=direction, load_if_exists=True)
            _baseline(study, created)
            return created
        except (ImportError, ValueError) as e:  # an unknown database driver, a URL it cannot read, another direction
            raise TbuildError(f"--storage {url}: {str(e).strip().splitlines()[0]}") from None
        except Exception as e:  # noqa: BLE001 - SQLAlchemy's errors are not exported here
            # another worker created the tables (OperationalError: "table ... already exists") or the study
            # (IntegrityError) at the same time: both are the schema race, which a retry resolves
            race = "IntegrityError" in type(e).__name__ or "already exists" in str(e)
            if race and attempt < 4:
                time.sleep(0.5 * (attempt + 1))
                continue
            raise TbuildError(f"storage {url}: {type(e).__name__}: {str(e).strip().splitlines()[0]}") from None


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
    return samplers.TPESampler(seed=cfg.seed, n_startup_trials=cfg.startup_trials)


def pruner(study: Study) -> Any:
    """The study file's pruner; steps are training steps (each validation reports one)."""
    pruners = _optuna().pruners
    cfg, maximize = study.spec.pruner, study.spec.objective.maximize
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


def budget_spent(study: Study, optuna_study: Any) -> str | None:
    """Why no further trial starts (the trials or minutes of the budget are spent; the grid is done),
    counting every worker's trials; None while there is budget left."""
    optuna = _optuna()
    from optuna.trial import TrialState

    optuna.storages.fail_stale_trials(optuna_study)  # a killed worker's trial: failed (and retried) first
    trials = optuna_study.get_trials(deepcopy=False)
    budget = study.spec.budget
    counted = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)]
    waiting = any(t.state == TrialState.WAITING for t in trials)  # a retry: it goes before the budget's end
    if budget.trials is not None and len(counted) >= budget.trials and not waiting:
        return f"the budget's {budget.trials} trials are done"
    spent = sum(float(t.user_attrs.get("train_minutes", 0.0)) for t in trials)
    if budget.minutes is not None and spent >= budget.minutes and not waiting:
        return f"the budget's {budget.minutes:g} training minutes are spent ({spent:.1f})"
    sampler = optuna_study.sampler
    if isinstance(sampler, optuna.samplers.GridSampler) and sampler.is_exhausted(optuna_study) and not waiting:
        return "every point of the grid is tried"
    return None


def optimize(study: Study, optuna_study: Any, objective: Callable[[Any], float],
             say: Callable[[str], None]) -> str:
    """Run trials one at a time until the budget is spent; returns why it stopped. A trial that fails
    for its own reason (a spec its values make invalid, a model that does not fit) is reported and the
    study goes on; Ctrl-C (``Interrupted``) and errors of the study itself stop it."""
    from tbuild.builder import SpecError

    def told(optuna_study: Any, trial: Any) -> None:
        say(describe(trial, optuna_study))

    while (why := budget_spent(study, optuna_study)) is None:
        optuna_study.optimize(objective, n_trials=1, callbacks=[told],
                              catch=(TbuildError, SpecError, ValueError, RuntimeError))
    return why


def describe(trial: Any, optuna_study: Any) -> str:
    """A finished trial in one line, with the study's best so far."""
    state = state_of(trial)
    steps = trial.user_attrs.get("steps")
    at = f" at step {steps}" if steps is not None else ""
    value = f" {trial.value:.4g}" if trial.value is not None else ""
    line = f"trial {trial.number} {state}{value}{at}"
    if state == "fail":
        line += f": {trial.user_attrs.get('error', 'see its folder for why')}"
    try:
        best = optuna_study.best_trial
        line += f"; best so far: trial {best.number}, {best.value:.4g}"
    except ValueError:  # no complete trial yet
        pass
    return line
