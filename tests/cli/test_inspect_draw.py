"""`tbuild inspect --draw/--mermaid`: the architecture drawn from the resolved spec, for every shipped spec."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tbuild.cli.app import app
from tests.conftest import REPO

runner = CliRunner()
SPECS = sorted((REPO / "specs" / "examples").glob("*.yaml")) + sorted((REPO / "specs").glob("*.yaml"))


@pytest.mark.parametrize("spec", SPECS, ids=[p.stem for p in SPECS])
def test_every_spec_is_drawn(spec: Path, tmp_path: Path) -> None:
    out = tmp_path / "model.svg"
    result = runner.invoke(app, ["inspect", str(spec), "--draw", str(out), "--mermaid"])
    assert result.exit_code == 0, result.output
    svg = out.read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "Encoder" in svg and "Decoder" in svg
    chart = result.stdout[result.stdout.index("flowchart BT"):]
    assert 'subgraph encoder["Encoder"]' in chart and "out[" in chart and "-. encoder output .->" in chart


def test_a_heterogeneous_stack_shows_each_group(tmp_path: Path) -> None:
    spec = REPO / "specs" / "examples" / "heterogeneous.yaml"
    result = runner.invoke(app, ["inspect", str(spec), "--mermaid"])
    assert result.exit_code == 0, result.output
    nodes = [line.strip() for line in result.stdout.splitlines()
             if line.strip()[:2] in ("e0", "e1", "d0", "d1") and "[" in line]
    assert [n[:2] for n in nodes] == ["e0", "e1", "d0", "d1"]
    assert "local (window=3)" in nodes[0] and "FFN: gelu" in nodes[0] and "FFN: relu" in nodes[1]
    assert "causal" in nodes[2] and "cross-attention: multihead" in nodes[2] and "49,984 params" in nodes[0]
    assert result.stdout.count("-. encoder output .->") == 2  # both decoder groups attend to the encoder
    png = tmp_path / "het.png"
    assert runner.invoke(app, ["inspect", str(spec), "--draw", str(png)]).exit_code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = runner.invoke(app, ["inspect", str(spec), "--draw", str(tmp_path / "x.pdf")])
    assert bad.exit_code == 2 and "must end in .svg or .png" in bad.output
