"""`tbuild inspect` on a fine-tuning spec whose source run is not trained yet: the model's table, then one
line saying the load plan waits for the source, exit 0; nothing written. A source that exists but cannot be
read is still an error (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app

REPO = Path(__file__).resolve().parents[2]
FINETUNE = REPO / "specs" / "finetune"
runner = CliRunner()
WIDE = {"COLUMNS": "300"}


def _inspect(spec: Path) -> tuple[int, list[str], str]:
    result = runner.invoke(app, ["inspect", str(spec)], env=WIDE)
    return result.exit_code, result.stdout.splitlines(), result.output


def test_the_shipped_fine_tuning_spec_before_its_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # runs/small-de (the source) does not exist here
    code, lines, output = _inspect(FINETUNE / "small-de-to-fr.yaml")
    assert code == 0, output
    assert lines[0].startswith("small-de-to-fr: parameters per block")
    assert any(line.startswith("│ total") and "2,413,056" in line for line in lines)
    assert lines[-1] == ("train.init: from runs/small-de: no such run yet; the load plan is shown once the source "
                         "is trained")
    assert "error" not in output
    assert list(tmp_path.iterdir()) == []  # inspecting writes nothing


def _spec_from(tmp_path: Path, source: str) -> Path:
    spec = tmp_path / "ft.yaml"
    spec.write_text(yaml.safe_dump({"extends": str(FINETUNE / "small-fr.yaml"), "output_dir": str(tmp_path / "ft"),
                                    "train": {"init": {"from": source}}}))
    return spec


def test_a_source_spec_whose_run_has_no_checkpoints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    source = FINETUNE / "small-de.yaml"
    (tmp_path / "runs" / "small-de").mkdir(parents=True)  # a run started, killed before its first checkpoint
    code, lines, output = _inspect(_spec_from(tmp_path, str(source)))
    assert code == 0, output
    assert lines[-1] == (f"train.init: from {source}: its run runs/small-de has no checkpoints yet (`tbuild train "
                         f"{source}` trains it); the load plan is shown once the source is trained")


def test_a_source_folder_that_is_not_a_run_yet(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    code, lines, output = _inspect(_spec_from(tmp_path, str(tmp_path / "src")))
    assert code == 0, output
    assert lines[-1] == (f"train.init: from {tmp_path / 'src'}: not a run directory yet (no spec.yaml); the load "
                         "plan is shown once the source is trained")


def test_a_source_that_exists_but_cannot_be_read_is_an_error(tmp_path: Path) -> None:
    broken = tmp_path / "src" / "best.safetensors"
    broken.parent.mkdir()
    broken.write_bytes(b"not a checkpoint")
    code, _, output = _inspect(_spec_from(tmp_path, str(broken)))
    assert code == 2, output
    assert output.strip().splitlines()[-1].startswith("error: ") and "Traceback" not in output
