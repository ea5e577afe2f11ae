"""`tbuild validate` (and `inspect`) given a sweep file: one line pointing to `tbuild sweep FILE --dry-run`,
exit 2, instead of an unknown-key error per sweep key; a spec with a stray key keeps its precise error."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tbuild.cli.app import app

REPO = Path(__file__).resolve().parents[2]
SWEEPS = sorted((REPO / "specs" / "sweeps").glob("*.yaml"))
runner = CliRunner()
WIDE = {"COLUMNS": "300"}


@pytest.mark.parametrize("command", ["validate", "inspect"])
@pytest.mark.parametrize("sweep", SWEEPS, ids=[p.stem for p in SWEEPS])
def test_a_sweep_file_points_to_sweep_dry_run(command: str, sweep: Path) -> None:
    result = runner.invoke(app, [command, str(sweep)], env=WIDE)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert lines == [f"error: {sweep}: this is a sweep file, not a spec: run `tbuild sweep {sweep} --dry-run` "
                     "to validate every row and print its plan"]
    assert "unknown key" not in result.output


def test_the_pointer_names_a_command_that_works(tmp_path: Path) -> None:
    sweep = tmp_path / "mine.yaml"
    sweep.write_text(f"base: {REPO / 'specs' / 'multi30k.yaml'}\nrows:\n  - {{name: base}}\n")
    assert runner.invoke(app, ["validate", str(sweep)], env=WIDE).exit_code == 2
    dry = runner.invoke(app, ["sweep", str(sweep), "--dry-run"], env=WIDE)
    assert dry.exit_code == 0, dry.output
    assert "base" in dry.output


@pytest.mark.parametrize(("text", "message"), [
    ("base: x.yaml\nmodel: {d_model: 16}\n", "base: unknown key 'base'"),  # a spec's stray key: not a sweep file
    ("base: [unclosed\n", "YAML syntax error"),
])
def test_specs_keep_their_own_errors(tmp_path: Path, text: str, message: str) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    result = runner.invoke(app, ["validate", str(spec)], env=WIDE)
    assert result.exit_code == 2, result.output
    assert message in result.output and "sweep file" not in result.output
