"""Every command that runs a model says, in one line on stderr, which precision it chose and why; a
forced bf16 that this machine measures slower warns. The measurement comes from a planted cache entry
(a stand-in for an emulated-bf16 CPU), so the outcome is the same on every machine."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.engine.device import precision
from tests.conftest import tiny_train_spec

runner = CliRunner()


def plant(cache: Path, d_model: int, d_ff: int, bf16_speed: float) -> None:
    """Cache entries saying bf16 runs at ``bf16_speed`` × fp32 at these widths, for every thread count
    the CLI may set (it sets threads before measuring)."""
    entries = {}
    for threads in range(1, (os.cpu_count() or 1) + 1):
        identity = {**precision.cpu_identity(), "threads": str(threads), "d_model": d_model, "d_ff": d_ff}
        entries[json.dumps(identity, sort_keys=True)] = {"fp32_gflops": 100.0, "bf16_gflops": 100.0 * bf16_speed}
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "precision.json").write_text(json.dumps(entries))


@pytest.mark.parametrize(("precision_", "expected", "warned"), [
    ("auto", "precision auto → fp32 (bf16 matmul 0.02× fp32 on this CPU, cached measurement)", False),
    ("bf16", "precision bf16 (set in the spec; bf16 matmul 0.02× fp32 on this CPU, cached measurement)", True),
    ("fp32", "precision fp32 (set in the spec)", False),
])
def test_train_says_what_it_chose(precision_: str, expected: str, warned: bool, tiny_corpus: Path, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TBUILD_CACHE_DIR", str(tmp_path / "cache"))
    plant(tmp_path / "cache", 32, 64, 0.02)  # tiny_train_spec's widths
    spec = tiny_train_spec(tiny_corpus, tmp_path / "run", max_steps=1, precision=precision_)
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = runner.invoke(app, ["train", str(tmp_path / "spec.yaml"), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert expected in result.output
    assert ("bf16 matmuls run at 0.02× the fp32 speed on this CPU" in result.stderr) == warned, result.stderr


def test_decode_says_what_it_chose_on_stderr(tiny_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TBUILD_CACHE_DIR", str(tmp_path / "cache"))
    plant(tmp_path / "cache", 32, 64, 0.02)
    auto = runner.invoke(app, ["decode", str(tiny_run), "--device", "cpu"], input="A dog runs.\n")
    assert auto.exit_code == 0, auto.output
    assert "precision auto → fp32 (no bf16 check recorded for this run on this CPU" in auto.stderr
    assert "precision" not in auto.stdout
    forced = runner.invoke(app, ["decode", str(tiny_run), "--device", "cpu", "--set", "decode.precision=bf16"],
                           input="A dog runs.\n")
    assert forced.exit_code == 0, forced.output
    assert "warning: precision bf16 is set, but bf16 matmuls run at 0.02× the fp32 speed" in forced.stderr
