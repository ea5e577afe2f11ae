"""`--compile`: the decoder step through torch.compile gives the tokens eager decoding gives."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tbuild.cli.app import app

runner = CliRunner()
TEXT = "A dog runs in the snow.\n\nTwo men are talking in a small room near the window.\nA cat.\n"


@pytest.mark.slow  # the compilation: about half a minute on 2 cores
def test_compiled_decoding_gives_the_same_lines(tiny_run: Path, tmp_path: Path) -> None:
    run = Path(shutil.copytree(tiny_run, tmp_path / "run"))
    plain = runner.invoke(app, ["decode", str(run), "--device", "cpu", "--nbest", "2"], input=TEXT)
    compiled = runner.invoke(app, ["decode", str(run), "--device", "cpu", "--nbest", "2", "--compile"], input=TEXT)
    assert plain.exit_code == compiled.exit_code == 0, compiled.output
    assert "decoder step compiled with torch.compile" in compiled.stderr
    ours, theirs = _nbest(plain.stdout), _nbest(compiled.stdout)
    assert len(ours) == 7  # 2 + 1 (empty line) + 2 + 2
    # the same outputs; scores to float32 rounding (eager float32 runs oneDNN-packed weights, packed.py)
    assert [line[:2] for line in theirs] == [line[:2] for line in ours]
    assert [s for line in theirs for s in line[2:]] == pytest.approx([s for line in ours for s in line[2:]], abs=1e-3)


def _nbest(stdout: str) -> list[tuple]:
    """n-best lines "i ||| output ||| score" as (i, output, score); an empty line as ()."""
    rows = [line.split(" ||| ") for line in stdout.splitlines()]
    return [(row[0], row[1], float(row[2])) if len(row) == 3 else () for row in rows]
