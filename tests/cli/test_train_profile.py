"""`tbuild train --profile N`: N steps under torch.profiler, a Chrome/TensorBoard trace in RUN/profile/
and a table of the top operators; no checkpoint, metrics line or best weights written. The device
timeline's busy share and host gaps are checked on made-up kernel intervals (the GPU's are measured)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.engine.training.profile import busy
from tests.conftest import tiny_train_spec

runner = CliRunner()


def test_profile_writes_a_trace_and_a_table_and_no_checkpoint(tiny_corpus: Path, tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(tiny_train_spec(tiny_corpus, tmp_path / "run")), encoding="utf-8")
    result = runner.invoke(app, ["train", str(spec), "--profile", "2"])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())  # the table's lines, whatever the terminal's width
    assert "profiled 2 steps on cpu" in out and "top operators by self time:" in out
    assert "aten::" in out
    traces = list((tmp_path / "run" / "profile").glob("*.pt.trace.json"))
    assert len(traces) == 1 and json.loads(traces[0].read_text())["traceEvents"]
    assert not list((tmp_path / "run").glob("checkpoints/*")) and not (tmp_path / "run" / "best.safetensors").exists()
    assert not (tmp_path / "run" / "metrics.jsonl").exists() or not (tmp_path / "run" / "metrics.jsonl").read_text()


def test_profile_refuses_a_non_positive_count(tiny_corpus: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["train", str(tmp_path / "missing.yaml"), "--profile", "0"])
    assert result.exit_code != 0 and "--profile" in result.output


def test_busy_unions_overlapping_kernels_and_lists_the_gaps() -> None:
    found = busy([(10, 20), (15, 30), (40, 50), (45, 48), (90, 120)], (0, 100))
    assert found.busy_us == pytest.approx(20 + 10 + 10)  # 10-30, 40-50, 90-100 (clipped to the window)
    assert found.gaps_us == [40, 10, 10]  # 50-90, 0-10, 30-40
    assert found.share == pytest.approx(0.4)
    assert busy([], (0, 10)).share == 0 and busy([], (0, 10)).gaps_us == [10]
