"""A study survives its own crash: a running trial whose worker ran on this machine and holds its lock no
more is failed and retried at once (no heartbeat wait), one whose worker cannot be checked is waited on for
the heartbeat's grace period (failed if it goes stale, counted if it beats), and a study killed mid-trial
and rerun at once ends with every trial of its budget complete and none left running."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tbuild.engine.run.lock import RunLock, held_by
from tests.conftest import tiny_train_spec
from tests.engine.tune.test_study_file import GOOD, _study
from tests.engine.tune.test_tune import TBUILD, _first_checkpoint, _write_study

optuna = pytest.importorskip("optuna", reason="the tune extra (Optuna) is not installed")
pytestmark = pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used with Study.optimize")


def _open(tmp_path: Path, trials: int) -> tuple[Any, Any]:
    """A study of ``trials`` trials in tmp_path/study, heartbeat every second (grace: 2 s), no baseline."""
    from tbuild.engine.tune.spec import load_study
    from tbuild.engine.tune.study import open_study

    body = GOOD.replace("budget: {trials: 3, trial_steps: 100}", f"budget: {{trials: {trials}}}")
    study = load_study(_study(tmp_path, body + f"output_dir: {tmp_path / 'study'}\nbaseline: false\n"
                                                "storage: {heartbeat_seconds: 1, retries: 1}\n"))
    return study, open_study(study)


def _running(optuna_study: Any, worker: dict | None = None) -> Any:
    """A running trial with a value asked (and, given, a worker record for itself)."""
    trial = optuna_study.ask()
    trial.suggest_float("train.schedule.lr", 1e-4, 3e-3, log=True)
    if worker is not None:
        trial.set_user_attr("worker", {"trial": trial.number, **worker})
    return trial


def _beat(optuna_study: Any, trial: Any, stop: threading.Event) -> threading.Thread:
    """A heartbeat for ``trial`` every 0.3 s until ``stop``, as a live worker elsewhere writes one."""
    def beat() -> None:
        while not stop.is_set():
            optuna_study._storage.record_heartbeat(trial._trial_id)
            stop.wait(0.3)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    return thread


def test_held_by_names_the_live_holder_and_none_once_it_is_gone(tmp_path: Path) -> None:
    lock = RunLock(tmp_path, ".worker.lock").acquire()
    assert held_by(tmp_path / ".worker.lock") == str(os.getpid())
    lock.release()
    assert held_by(tmp_path / ".worker.lock") is None and held_by(tmp_path / "never") is None
    again = RunLock(tmp_path, ".worker.lock").acquire(wait=1.0)  # the look took nothing away
    again.release()


def test_settle_retries_a_dead_workers_trial_at_once_and_keeps_a_live_one(tmp_path: Path) -> None:
    from tbuild.engine.tune.workers import Workers, claim, this_machine

    study, optuna_study = _open(tmp_path, 3)
    alive = _running(optuna_study)
    lock = claim(alive, tmp_path / "study" / "trials" / "trial-000")  # held by this process
    dead = _running(optuna_study)
    claim(dead, tmp_path / "study" / "trials" / "trial-001").release()  # its process gone: the lock is free
    elsewhere = _running(optuna_study, {"machine": "another-host/another-boot", "pid": 1, "lock": "/nowhere"})
    silent = _running(optuna_study)  # never said where it runs
    said: list[str] = []
    workers = Workers(study, said.append)
    live, unknown = workers.settle(optuna_study)
    assert [t.number for t in live] == [alive.number]
    assert [t.number for t in unknown] == [elsewhere.number, silent.number]
    states = {t.number: t.state.name for t in optuna_study.get_trials()}
    assert states[dead.number] == "FAIL" and list(states.values()).count("WAITING") == 1
    retry = next(t for t in optuna_study.get_trials() if t.state.name == "WAITING")
    assert retry.params == optuna_study.trials[dead.number].params  # the same values, tried again
    pid = os.getpid()
    assert said == [f"trial {dead.number}: its worker (process {pid} on this machine) has ended without finishing "
                    "it; failed, and tried again"]
    assert workers.settle(optuna_study)[0][0].number == alive.number and len(said) == 1  # failed once only
    assert optuna_study.trials[alive.number].user_attrs["worker"]["machine"] == this_machine()
    lock.release()


def test_a_budget_that_hinges_on_a_trial_that_cannot_be_checked_waits_for_its_heartbeat(tmp_path: Path) -> None:
    from tbuild.engine.tune.study import budget_spent
    from tbuild.engine.tune.workers import Workers

    study, optuna_study = _open(tmp_path, 1)
    gone = _running(optuna_study, {"machine": "another-host/another-boot", "pid": 7, "lock": "/nowhere"})
    optuna_study._storage.record_heartbeat(gone._trial_id)  # one beat, then silence: its worker died there
    said: list[str] = []
    started = time.monotonic()
    assert budget_spent(study, optuna_study, Workers(study, said.append)) is None  # its retry goes first
    assert time.monotonic() - started >= 2.0  # its grace period (2 x 1 s), not at once
    assert said == [f"trial {gone.number} runs in process 7 on another-host/another-boot, which cannot be checked "
                    "from here; the budget hinges on it: waiting up to 3 s (the heartbeat's grace period and one beat) "
                    "to see whether it is alive"]
    assert [t.state.name for t in optuna_study.get_trials()] == ["FAIL", "WAITING"]

    (tmp_path / "live").mkdir()
    study, optuna_study = _open(tmp_path / "live", 1)
    beating = _running(optuna_study, {"machine": "another-host/another-boot", "pid": 8, "lock": "/nowhere"})
    stop = threading.Event()
    thread = _beat(optuna_study, beating, stop)
    try:
        why = budget_spent(study, optuna_study, Workers(study, lambda _: None))
    finally:
        stop.set()
        thread.join()
    assert why == ("the budget's 1 trials are done or under way (trial 0 in process 8 on "
                   "another-host/another-boot)")  # alive through a whole grace period: it counts
    assert [t.state.name for t in optuna_study.get_trials()] == ["RUNNING"]


@pytest.mark.slow
def test_a_study_killed_mid_trial_and_rerun_at_once_completes_every_trial_of_its_budget(tmp_path: Path,
                                                                                         tiny_corpus: Path) -> None:
    """The case of the issue: a 3-trial study killed with SIGKILL during its second trial, rerun at once (the
    heartbeat's 120-s grace period far from over): the dead trial is retried at once, resuming its run, and
    the budget's 3 trials end complete, none left running."""
    base = tiny_train_spec(tiny_corpus, tmp_path / "unused", max_steps=1000, validate_every=10, checkpoint_every=2)
    base.pop("output_dir")
    base["decode"] = {"beam": 1, "max_len_a": 1.0, "max_len_b": 5}
    study = _write_study(tmp_path, base, """\
space:
  train.schedule.lr: {float: [1.0e-4, 3.0e-3], log: true}
objective: {metric: bleu, lines: 8}
budget: {trials: 3, trial_steps: 20}
sampler: {kind: random, seed: 3}
pruner: {kind: none}
""")
    proc = subprocess.Popen([*TBUILD, "tune", str(study)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run = _first_checkpoint(proc, tmp_path / "study" / "trials" / "trial-001")
    assert proc.poll() is None, "the study ended before its second trial could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = subprocess.run([*TBUILD, "tune", str(study)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert (f"trial 1: its worker (process {proc.pid} on this machine) has ended without finishing it; failed, and "
            "tried again") in out, out
    assert "resuming trial 1's run" in out and "the budget's 3 trials are done" in out and "under way" not in out
    assert "waiting" not in out  # never the heartbeat's grace period (every wait says so)
    trials = optuna.load_study(study_name="study", storage=f"sqlite:///{tmp_path / 'study' / 'study.db'}").trials
    assert [t.state.name for t in trials] == ["COMPLETE", "FAIL", "COMPLETE", "COMPLETE"]
    assert trials[2].user_attrs["folder_trial"] == 1 and trials[2].user_attrs["steps"] == 20
    assert (run / "trial.json").read_text().count('"state": "complete"') == 1


def test_a_trial_whose_worker_recorded_its_end_and_freed_its_lock_is_being_stored_not_dead(tmp_path: Path) -> None:
    """Its worker records the end, frees the lock, then Optuna stores the state: another worker looking in
    between must not fail it and retry it in the same folder (two processes sharing a study once did)."""
    from tbuild.engine.tune.trial import TrialRecord
    from tbuild.engine.tune.workers import claim, liveness, this_machine

    study, optuna_study = _open(tmp_path, 3)
    trial = _running(optuna_study)
    folder = tmp_path / "study" / "trials" / "trial-000"
    claim(trial, folder).release()
    stored = optuna_study.trials[trial.number]
    assert liveness(stored, this_machine()) == "dead"  # no end recorded: its worker died
    TrialRecord(folder, "study", trial.number, trial.number, {}).write("complete")
    assert liveness(stored, this_machine()) == "alive"  # ended, its process alive: being stored
