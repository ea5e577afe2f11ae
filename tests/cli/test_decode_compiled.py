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
    assert compiled.stdout == plain.stdout and len(plain.stdout.splitlines()) == 7  # 2 + 1 (empty line) + 2 + 2
