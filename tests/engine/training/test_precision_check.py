"""A CPU run's precision auto, confirmed from its own steps (engine/training/precision_check.py): a probe taken
on a loaded machine is neither cached nor trusted for the whole run; the run's first steps decide, the verdict
is saved in the state, and a resumed run continues in it without measuring again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from safetensors import safe_open
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.engine.device import precision
from tbuild.engine.device.policy import Policy
from tbuild.engine.device.precision import Probe
from tbuild.engine.run.directory import RunDir
from tbuild.engine.training import precision_check
from tbuild.engine.training.precision_check import WARMUP, WINDOW, PrecisionCheck, cpu_key, resumed
from tests.conftest import tiny_train_spec


def test_the_window_and_the_rule() -> None:
    check = PrecisionCheck("fp32", start=10)
    assert [s for s in range(30) if check.timing(s)] == list(range(10 + WARMUP, 10 + WARMUP + WINDOW))
    for _ in range(WINDOW):
        assert check.verdict() is None
        check.record("fp32", 1.2, 100)
        check.record("bf16", 1.0, 100)
    assert check.ratio() == pytest.approx(1.2) and check.verdict() == "bf16"  # the probe's rule: 1.2× or more
    check.seconds["bf16"] = [1.01] * WINDOW
    assert check.verdict() == "fp32"


def test_a_saved_verdict_decides_on_its_cpu_only() -> None:
    probed = Policy(torch.device("cpu"), None, "precision auto → fp32 (…)", checkable=True)
    policy, checking = resumed(probed, "bf16", cpu_key())
    assert policy.precision == "bf16" and not checking and "this run's own steps" in policy.note
    assert resumed(probed, "bf16", "another cpu") == (probed, True)
    assert resumed(probed, None, None) == (probed, True)
    forced = Policy(torch.device("cpu"), None, "precision fp32 (set in the spec)")
    assert resumed(forced, "bf16", cpu_key()) == (forced, False)  # the spec's own choice is kept


def _saved_state(run: Path) -> dict:
    newest = RunDir(run).step_checkpoints()[-1]
    with safe_open(str(newest), "pt") as f:
        return json.loads(f.metadata()["tbuild"])


def test_a_loaded_machines_probe_neither_is_cached_nor_fixes_the_run(
        tiny_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe, on a busy machine, measures bf16 at half fp32's speed: fp32 is chosen, nothing cached. The run's
    own steps then measure bf16 at 10× (a stand-in for the machine once the load is gone): from step WARMUP +
    WINDOW the run trains in bf16, saved in its state; resumed, it continues in bf16 whatever the probe says, and
    checks no more."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("TBUILD_CACHE_DIR", str(cache))
    monkeypatch.setattr(precision, "machine_busy", lambda: True)
    monkeypatch.setattr(precision, "_measured", lambda d, f, timer: (Probe(100.0, 50.0), True))
    record = PrecisionCheck.record

    def bf16_ten_times_faster(self: PrecisionCheck, name: str, seconds: float, tokens: int) -> None:
        record(self, name, seconds / 10 if name == "bf16" else seconds, tokens)

    monkeypatch.setattr(precision_check.PrecisionCheck, "record", bf16_ten_times_faster)
    run, spec = tmp_path / "run", tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(tiny_train_spec(tiny_corpus, run, precision="auto", max_steps=14,
                                                   validate_every=100, checkpoint_every=7)))
    first = CliRunner().invoke(app, ["train", str(spec)])
    assert first.exit_code == 0, first.output
    assert "precision auto → fp32 (bf16 matmul 0.50× fp32 on this CPU, measured now)" in first.output
    assert f"precision auto → bf16 after step {WARMUP + WINDOW} (real steps ran bf16 at" in first.output
    assert not (cache / "precision.json").exists()
    state = _saved_state(run)
    assert (state["precision"], state["precision_cpu"]) == ("bf16", cpu_key())
    monkeypatch.setattr(PrecisionCheck, "record", record)  # the real timings: no check runs on a resume
    spec.write_text(yaml.safe_dump(tiny_train_spec(tiny_corpus, run, precision="auto", max_steps=20,
                                                   validate_every=100, checkpoint_every=7)))
    again = CliRunner().invoke(app, ["train", str(spec)])
    assert again.exit_code == 0, again.output
    assert "precision auto → bf16 (this run's own steps measured it on this CPU)" in again.output
    assert "real steps ran" not in again.output and _saved_state(run)["precision"] == "bf16"
