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
    assert "FFN: silu" in nodes[2] and "FFN: relu" in nodes[3]
    assert result.stdout.count("-. encoder output .->") == 2  # both decoder groups attend to the encoder
    png = tmp_path / "het.png"
    assert runner.invoke(app, ["inspect", str(spec), "--draw", str(png)]).exit_code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = runner.invoke(app, ["inspect", str(spec), "--draw", str(tmp_path / "x.pdf")])
    assert bad.exit_code == 2 and "must end in .svg or .png" in bad.output


def chart_and_svg(spec: dict, tmp_path: Path) -> tuple[str, str]:
    """`tbuild inspect SPEC --draw x.svg --mermaid` of ``spec``: the flowchart and the drawing."""
    import yaml

    path, out = tmp_path / "spec.yaml", tmp_path / "model.svg"
    path.write_text(yaml.safe_dump(spec))
    result = runner.invoke(app, ["inspect", str(path), "--draw", str(out), "--mermaid"])
    assert result.exit_code == 0, result.output
    return result.stdout[result.stdout.index("flowchart BT"):], out.read_text()


def test_a_decoder_only_model_is_the_decoder_alone(tmp_path: Path) -> None:
    spec = {"model": {"kind": "decoder_only", "vocab_size": 100, "d_model": 32, "tie_embeddings": "decoder",
                      "positional": {"kind": "rope"}, "norm_placement": "pre",
                      "decoder": {"groups": [{"repeat": 1, "order": "parallel"}, {"repeat": 2}], "heads": 2,
                                  "d_ff": 64}}}
    chart, svg = chart_and_svg(spec, tmp_path)
    assert 'subgraph decoder["Decoder"]' in chart and "subgraph encoder" not in chart
    assert "cross-attention" not in chart and "encoder output" not in chart and "eemb" not in chart
    nodes = [line.strip() for line in chart.splitlines() if "[" in line and "subgraph" not in line]
    assert [n.split("[")[0] for n in nodes] == ["demb", "d0", "d1", "dnorm", "out"]
    assert "token embedding + rope positions" in nodes[0] and "shared with the output projection" in nodes[0]
    assert "order: " in nodes[1] and "causal" in nodes[1] and "order: " not in nodes[2]  # the group's own order
    assert "tied to the token embedding" in nodes[4] and "  dnorm --> out" in chart
    assert "Decoder" in svg and "Encoder" not in svg and "decoder_only" in svg


@pytest.mark.parametrize(("head", "data", "says"), [
    ({"kind": "token_classification", "labels": ["DT", "NN", "VB"]}, "tagging", "token_classification"),
    ({"kind": "sequence_classification", "labels": ["de", "en"], "pooling": "first"}, "classification",
     "pooling first"),
], ids=["tagger", "classifier"])
def test_an_encoder_only_model_is_the_encoder_and_its_head(head: dict, data: str, says: str, tmp_path: Path) -> None:
    spec = {"model": {"kind": "encoder_only", "vocab_size": 100, "d_model": 32, "head": head,
                      "encoder": {"layers": 2, "heads": 2, "d_ff": 64}},
            "data": {"dataset": {"kind": data, "source": "files"}}}
    chart, svg = chart_and_svg(spec, tmp_path)
    assert 'subgraph encoder["Encoder"]' in chart and "subgraph decoder" not in chart
    assert "causal" not in chart and "cross-attention" not in chart and "shared" not in chart
    out = next(line for line in chart.splitlines() if line.strip().startswith("out["))
    assert f"output head: {head['kind']}" in out and f"{len(head['labels'])} labels" in out and says in out
    assert "  enorm --> out" in chart or "  e0 --> out" in chart
    assert "Encoder" in svg and "Decoder" not in svg and "output head" in svg
