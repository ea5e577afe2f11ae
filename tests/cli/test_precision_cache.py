"""`tbuild precision`: the cached bf16 probes shown, and cleared."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.engine.device import precision
from tbuild.engine.device.precision import bf16_probe


def test_the_cache_is_shown_and_cleared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TBUILD_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr(precision, "machine_busy", lambda: False)
    runner = CliRunner()
    empty = runner.invoke(app, ["precision"])
    assert empty.exit_code == 0 and "no cached probe" in empty.output

    def timer(dtype: str, shape: tuple[int, int, int]) -> float:  # bf16 at 2.5× fp32's 100 GFLOP/s
        rows, d_in, d_out = shape
        return 2 * rows * d_in * d_out / (250e9 if dtype == "bf16" else 100e9)

    bf16_probe(256, 1024, timer)
    shown = runner.invoke(app, ["precision"])
    assert shown.exit_code == 0, shown.output
    assert "2.50×" in shown.output and "100.0" in shown.output and "250.0" in shown.output and "1024" in shown.output
    cleared = runner.invoke(app, ["precision", "--clear"])
    assert cleared.exit_code == 0 and "cleared 1 cached probe(s)" in cleared.output
    assert not (tmp_path / "precision.json").exists()
    assert "no cached probe" in runner.invoke(app, ["precision"]).output
