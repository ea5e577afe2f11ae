"""Whether a study's running trials still have a worker. Each trial's worker holds a lock in the trial's
folder (``run/lock.py``) from the trial's start to its end and records in the trial, once it holds it,
its machine, its process and that lock. A running trial whose worker ran on this machine and no longer
holds its lock is dead (``kill -9``, a crash): it is failed and retried at once, resuming its folder.
One whose worker runs on another machine (or never said where) can only be judged by its heartbeat:
Optuna fails it once its heartbeat is ``2 x storage.heartbeat_seconds`` old; until then it is alive,
and a worker whose budget hinges on it waits that long rather than end the study short."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..files import process_alive
from ..run.lock import RunLock, held_by
from .spec import Study

WORKER = "worker"  # user attribute: {trial, machine, pid, lock} of the process running the trial
WORKER_LOCK = ".worker.lock"  # in the trial's folder, held by that process while the trial runs
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def this_machine() -> str:
    """This machine (and boot): its host name and, on Linux, the kernel's boot id (two machines may share a
    host name; a lock on one says nothing of the other)."""
    try:
        boot = BOOT_ID.read_text().strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()}/{boot}" if boot else socket.gethostname()


def claim(trial: Any, folder: Path) -> RunLock:
    """Take the trial folder's worker lock for this process, then record it in the trial (in that order:
    whoever reads the record finds the lock held for as long as this process lives)."""
    folder.mkdir(parents=True, exist_ok=True)
    lock = RunLock(folder, WORKER_LOCK).acquire(wait=5.0)  # another worker's look lasts an instant
    trial.set_user_attr(WORKER, {"trial": trial.number, "machine": this_machine(), "pid": os.getpid(),
                                 "lock": str(lock.path.resolve())})
    return lock


TRIAL_FILE = "trial.json"  # a trial folder's record (``trial.TrialRecord``)
ENDED = ("complete", "pruned", "failed", "interrupted")  # a record's states once its worker is done with it


def read_trial(folder: Path) -> dict[str, Any] | None:
    """A trial folder's ``trial.json``, or None (none yet, or unreadable)."""
    try:
        return json.loads((folder / TRIAL_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def liveness(trial: Any, machine: str) -> str:
    """``alive`` or ``dead`` where the trial's worker ran on ``machine`` (its lock held by its process, or
    not); ``unknown`` where it ran elsewhere or has not said (a retry carries the record of the try it
    repeats, which names that try's number). A worker records its trial's end, then frees the lock, then Optuna
    stores the state: a free lock whose record has ended and whose process lives is a trial being stored, alive."""
    worker = trial.user_attrs.get(WORKER)
    if not isinstance(worker, dict) or worker.get("trial") != trial.number or worker.get("machine") != machine:
        return "unknown"
    lock = Path(worker["lock"])
    if held_by(lock) == str(worker["pid"]):
        return "alive"
    record = read_trial(lock.parent) or {}
    ending = record.get("trial") == trial.number and record.get("state") in ENDED and process_alive(int(worker["pid"]))
    return "alive" if ending else "dead"


def where(trial: Any, machine: str) -> str:
    """Where a running trial's worker is, in words."""
    worker = trial.user_attrs.get(WORKER)
    if not isinstance(worker, dict) or worker.get("trial") != trial.number:
        return "a worker that has not said where"
    here = worker.get("machine") == machine
    return f"process {worker.get('pid')} {'on this machine' if here else 'on ' + str(worker.get('machine'))}"


def retry_callback(study: Study) -> Any | None:
    """What a failed trial's retry is (``storage.retries`` times, with its reported validations): Optuna's
    callback, used for a stale heartbeat and for a dead worker alike."""
    from optuna.storages import RetryHeartbeatStaleTrialCallback

    retries = study.spec.storage.retries
    return RetryHeartbeatStaleTrialCallback(max_retry=retries, inherit_intermediate_values=True) if retries else None


@dataclass
class Workers:
    """The running trials of a study, looked at again before each trial a worker starts: dead ones failed
    and retried (``settle``), those whose worker cannot be checked watched for a grace period (``wait``)."""

    study: Study
    say: Callable[[str], None]
    machine: str = field(default_factory=this_machine)
    first_seen: dict[int, float] = field(default_factory=dict)  # unknown trial -> when first seen running
    told: set[int] = field(default_factory=set)

    @property
    def patience(self) -> float:
        """How long an unknown trial is watched: the heartbeat's grace period (2 beats, after which Optuna
        fails a trial whose heartbeat stopped) and one beat more, so that a dead one is failed before it could count."""
        return 3.0 * self.study.spec.storage.heartbeat_seconds

    def settle(self, optuna_study: Any) -> tuple[list[Any], list[Any]]:
        """Fail stale trials (heartbeat) and dead ones (this machine's, their lock free), each retried; the
        running trials that remain: (alive, unknown). An unknown one still running ``patience`` after it was
        first seen has had a heartbeat since: alive."""
        from optuna.storages import fail_stale_trials
        from optuna.trial import TrialState

        fail_stale_trials(optuna_study)
        alive, unknown = [], []
        for trial in optuna_study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            state = liveness(trial, self.machine)
            if state == "dead":
                self._retry(optuna_study, trial)
            elif state == "alive" or time.monotonic() - self.first_seen.setdefault(trial.number, time.monotonic()
                                                                                  ) > self.patience:
                alive.append(trial)
            else:
                unknown.append(trial)
        return alive, unknown

    def _retry(self, optuna_study: Any, trial: Any) -> None:
        """Fail a dead worker's trial and queue its retry (unless another worker did first)."""
        from optuna.trial import TrialState

        try:
            optuna_study.tell(trial.number, state=TrialState.FAIL)
        except (ValueError, RuntimeError):  # already finished: another worker failed it (or it ended) first
            return
        retry = retry_callback(self.study)
        if retry is not None:
            retry(optuna_study, trial)
        again = "tried again" if retry is not None else "not tried again (storage.retries: 0)"
        self.say(f"trial {trial.number}: its worker ({where(trial, self.machine)}) has ended without finishing "
                 f"it; failed, and {again}")

    def wait(self, unknown: list[Any]) -> None:
        """Say (once per trial) that the study waits for trials whose workers cannot be checked, then sleep
        until the next look."""
        for trial in unknown:
            if trial.number not in self.told:
                self.told.add(trial.number)
                self.say(f"trial {trial.number} runs in {where(trial, self.machine)}, which cannot be checked "
                         f"from here; the budget hinges on it: waiting up to {self.patience:g} s (the heartbeat's "
                         "grace period and one beat) to see whether it is alive")
        time.sleep(min(max(self.study.spec.storage.heartbeat_seconds / 2, 0.5), 10.0))

    def under_way(self, alive: list[Any]) -> str:
        return ", ".join(f"trial {t.number} in {where(t, self.machine)}" for t in alive)
