"""`tbuild export` of a decoder-only language model (--to hf: GPT2LMHeadModel or LlamaForCausalLM; --to
ctranslate2: its Generator) and of an encoder-only tagger (--to hf: XLMRobertaXLForTokenClassification),
each trained a few steps, with the parity report; the refusals are one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tbuild.cli.app import app
from tests.cli.test_lm import train_llama_like
from tests.cli.toy_tagger import toy_tagger

transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install -e '.[export]')")
runner = CliRunner()


@pytest.fixture(scope="module")
def lm_run(tiny_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama-like LM (RoPE, RMSNorm, SwiGLU, untied) trained 4 steps."""
    return train_llama_like(tiny_corpus, tmp_path_factory.mktemp("lm-export"))


def _parity(output: str) -> tuple[float, str]:
    flat = " ".join(output.split())
    return float(flat.split("max |Δ logit| on 16 lines: ")[1].split()[0]), flat


def test_export_lm_to_hf_loads_as_llama_and_matches(lm_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "hf"
    result = runner.invoke(app, ["export", str(lm_run), "-o", str(out), "--to", "hf", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    diff, flat = _parity(result.output)
    assert diff < 1e-4 and "greedy continuations identical: 100.0% of 8" in flat, result.output
    assert json.loads((out / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    assert json.loads((out / "graph-parity.json").read_text())["identical"] == 1.0
    assert (out / "tokenizer.model").is_file() and (out / "tbuild.json").is_file()
    assert isinstance(transformers.AutoModelForCausalLM.from_pretrained(str(out)), transformers.LlamaForCausalLM)


def test_export_lm_to_ctranslate2_generates_as_tbuild(lm_run: Path, tmp_path: Path) -> None:
    pytest.importorskip("ctranslate2", reason="ctranslate2 not installed (pip install -e '.[export]')")
    out = tmp_path / "ct2"
    result = runner.invoke(app, ["export", str(lm_run), "-o", str(out), "--to", "ctranslate2"])
    assert result.exit_code == 0, result.output
    diff, flat = _parity(result.output)
    assert diff < 1e-4 and "greedy continuations identical: 100.0% of 8" in flat, result.output
    assert (out / "model.bin").is_file()



def test_an_lm_export_that_computes_something_else_fails_its_parity(lm_run: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from tbuild.engine.export import graph_parity

    monkeypatch.setattr(graph_parity, "lm_logit_diff", lambda *args: 0.25)
    out = tmp_path / "off"
    result = runner.invoke(app, ["export", str(lm_run), "-o", str(out), "--to", "hf"])
    assert result.exit_code == 2, result.output
    assert "parity failed: max |Δ logit| 2.50e-01 is above 0.01" in " ".join(result.output.split())
    assert (out / "config.json").is_file() and (out / "graph-parity.json").is_file()

@pytest.fixture(scope="module")
def tagger_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny pre-norm tagger (learned positions) trained 3 steps on the toy files."""
    model = {"norm_placement": "pre", "positional": {"kind": "learned"}, "max_positions": 32}
    return toy_tagger(tmp_path_factory.mktemp("tagger-export"), model=model)[0]


def test_export_tagger_to_hf_predicts_the_same_labels(tagger_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "hf"
    result = runner.invoke(app, ["export", str(tagger_run), "-o", str(out), "--to", "hf"])
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    diff = float(flat.split("max |Δ logit| on 3 lines: ")[1].split()[0])
    assert diff < 1e-4 and "predicted labels identical: 100.0% of 26" in flat, result.output
    hf = transformers.AutoModelForTokenClassification.from_pretrained(str(out))
    assert hf.config.id2label == dict(enumerate(["DT", "MD", "NN", "NNS", "PRP", "VBZ"]))


def test_export_refusals_are_one_line(tagger_run: Path, lm_run: Path, tmp_path: Path) -> None:
    refused = runner.invoke(app, ["export", str(tagger_run), "--to", "ctranslate2"])
    assert refused.exit_code == 2
    assert "cannot export an encoder_only model to ctranslate2: CTranslate2's Encoder" in refused.output
    post = runner.invoke(app, ["export", str(lm_run), "--to", "hf", "--set", "model.norm_placement=post"])
    assert post.exit_code == 2 and "model.norm_placement post" in post.output, post.output
    assert len(post.output.strip().splitlines()) == 1
