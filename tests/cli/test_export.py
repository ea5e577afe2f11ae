"""`tbuild export`: writes a CTranslate2 model beside the run's tokenizer and prints the parity report."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app

pytest.importorskip("ctranslate2", reason="ctranslate2 not installed (pip install -e '.[export]')")


def test_export_ctranslate2_prints_parity(tiny_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "ct2"
    result = CliRunner().invoke(app, ["export", str(tiny_run), "-o", str(out), "--to", "ctranslate2",
                                      "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert (out / "model.bin").exists() and (out / "spm.model").exists()
    for expected in ("parity on 40 sentences (beam 3", "BLEU tbuild", "delta", "identical lines",
                     "max |Δ log-prob| teacher-forced"):
        assert expected in result.output
    logprob = float(result.output.split("teacher-forced (up to 16 lines): ")[1].split()[0])
    assert logprob < 1e-4


def test_export_with_check_files_int8_and_average(tiny_run: Path, tmp_path: Path) -> None:
    src, ref = tmp_path / "s.txt", tmp_path / "r.txt"
    src.write_text("A man is riding a bike.\nTwo dogs play.\n")
    ref.write_text("Ein Mann fährt Fahrrad.\nZwei Hunde spielen.\n")
    result = CliRunner().invoke(app, ["export", str(tiny_run), "-o", str(tmp_path / "q"), "--quantization", "int8",
                                      "--average", "2", "--check-src", str(src), "--check-ref", str(ref)])
    assert result.exit_code == 0, result.output
    assert "int8" in result.output and "average of" in result.output and "parity on 2 sentences" in result.output


def test_export_check_none_skips_parity(tiny_run: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["export", str(tiny_run), "-o", str(tmp_path / "x"), "--check", "none"])
    assert result.exit_code == 0, result.output
    assert "parity" not in result.output


def test_refused_kind_is_one_line_and_exit_code_2(tiny_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    spec = yaml.safe_load((tiny_run / "spec.yaml").read_text())
    spec["model"]["attention"] = {"kind": "local", "window": 2}
    (run / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = CliRunner().invoke(app, ["export", str(run), "-o", str(tmp_path / "x")])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "attention kind 'local'" in lines[0] and "ctranslate2 supports attention: multihead" \
        in lines[0]
    assert not (tmp_path / "x").exists()


def test_a_float32_export_that_computes_something_else_fails_its_parity(tiny_run: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A teacher-forced log-prob difference above the tolerance exits 2 in one line, the folder and its report
    kept; an int8 export's difference is only reported."""
    from tbuild.engine.export import parity

    monkeypatch.setattr(parity, "teacher_forced_diff", lambda *args: 0.5)
    out = tmp_path / "off"
    result = CliRunner().invoke(app, ["export", str(tiny_run), "-o", str(out), "--to", "ctranslate2"])
    assert result.exit_code == 2, result.output
    assert ("parity failed: max |Δ log-prob| 5.00e-01 is above 0.01, so the float32 export computes something else "
            f"than the run; {out} and its parity report are kept to inspect") in " ".join(result.output.split())
    assert (out / "model.bin").is_file() and (out / "parity.json").is_file()
    int8 = CliRunner().invoke(app, ["export", str(tiny_run), "-o", str(tmp_path / "q"), "--quantization", "int8"])
    assert int8.exit_code == 0, int8.output


def test_parity_failure_is_above_the_tolerance_or_nan() -> None:
    from tbuild.engine.export.parity import TOLERANCE, parity_failure

    assert parity_failure(TOLERANCE, None, "logit") is None and parity_failure(0.0, "float32", "logit") is None
    assert parity_failure(2 * TOLERANCE, None, "logit") is not None
    assert parity_failure(float("nan"), "float32", "log-prob") is not None
    assert parity_failure(1.0, "int8", "log-prob") is None
