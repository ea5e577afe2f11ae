"""`tbuild export --to hf`: writes a MarianMTModel folder (post-norm) or a PegasusForConditionalGeneration
folder (pre-norm: the README's recipe, specs/multi30k.yaml) that transformers loads, and prints the parity report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tests.conftest import REPO, tiny_train_spec

transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install -e '.[export]')")


@pytest.fixture(scope="module")
def hf_run(tiny_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny post-norm run with MarianMTModel's LayerNorm eps (1e-5), trained for 6 steps."""
    root = tmp_path_factory.mktemp("hf")
    spec = tiny_train_spec(tiny_corpus, root / "run")
    spec["model"].update(max_positions=40, norm={"kind": "layernorm", "eps": 1.0e-5})
    spec["decode"] = {"beam": 3, "max_len_a": 1.0, "max_len_b": 5}
    (root / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = CliRunner().invoke(app, ["train", str(root / "spec.yaml")])
    assert result.exit_code == 0, result.output
    return root / "run"


@pytest.fixture(scope="module")
def recipe_run(tiny_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """specs/multi30k.yaml as shipped (pre-norm, sinusoidal, three_way tying, LayerNorm eps 1e-6, beam 4 at
    α 1.2, its decode profiles), made tiny (widths, layers) and trained for 6 steps on the tiny corpus."""
    root = tmp_path_factory.mktemp("recipe")
    spec = yaml.safe_load((REPO / "specs" / "multi30k.yaml").read_text())
    tiny = tiny_train_spec(tiny_corpus, root / "run")
    spec["model"].update(d_model=32, encoder=tiny["model"]["encoder"], decoder=tiny["model"]["decoder"])
    spec |= {"output_dir": tiny["output_dir"], "data": tiny["data"], "train": tiny["train"]}
    (root / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = CliRunner().invoke(app, ["train", str(root / "spec.yaml")])
    assert result.exit_code == 0, result.output
    return root / "run"


def test_main_recipe_exports_to_pegasus_with_parity(recipe_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "hf"
    result = CliRunner().invoke(app, ["export", str(recipe_run), "-o", str(out), "--to", "hf", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "(hf, float32" in flat and "parity on 40 sentences (beam 4, α 1.2)" in flat, result.output
    assert "(greedy, both sides: 100.0%)" in flat
    assert float(result.output.split("teacher-forced (up to 16 lines): ")[1].split()[0]) < 1e-4
    assert "hf cannot honour decode profile 'fast': quantization int8" in flat  # the recipe's int8 profile
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["PegasusForConditionalGeneration"] and config["tie_word_embeddings"]
    tok = transformers.AutoTokenizer.from_pretrained(str(out))  # tokenizer_config.json names MarianTokenizer
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(str(out)).eval()
    assert type(model).__name__ == "PegasusForConditionalGeneration"
    batch = tok(["A man is riding a bike."], return_tensors="pt")
    text = tok.batch_decode(model.generate(**batch, num_beams=1, max_new_tokens=8), skip_special_tokens=True)
    assert len(text) == 1 and "<s>" not in text[0] and "</s>" not in text[0]


def test_export_hf_writes_a_loadable_marian_folder_and_prints_parity(hf_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "hf"
    result = CliRunner().invoke(app, ["export", str(hf_run), "-o", str(out), "--to", "hf", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    for name in ("config.json", "generation_config.json", "model.safetensors", "source.spm", "target.spm",
                 "vocab.json", "tokenizer_config.json"):
        assert (out / name).exists(), name
    flat = " ".join(result.output.split())  # rich wraps long lines
    for expected in ("wrote", "(hf, float32", "parity on 40 sentences (beam 3", "BLEU tbuild", "delta",
                     "identical lines", "beam outputs may differ"):
        assert expected in flat, result.output
    assert "(greedy, both sides: 100.0%)" in flat  # greedy search has no convention to differ in
    logprob = float(result.output.split("teacher-forced (up to 16 lines): ")[1].split()[0])
    assert logprob < 1e-4
    card = (out / "README.md").read_text()  # the model card, with this export's parity
    parity = json.loads((out / "parity.json").read_text())
    assert "### Export parity" in card and f"| hf | 40 | {parity['bleu_tbuild']:.2f} |" in card
    tok = transformers.MarianTokenizer.from_pretrained(str(out))
    model = transformers.MarianMTModel.from_pretrained(str(out))
    batch = tok(["A man is riding a bike."], return_tensors="pt")
    text = tok.batch_decode(model.generate(**batch, num_beams=1, max_new_tokens=8), skip_special_tokens=True)
    assert len(text) == 1 and "<s>" not in text[0] and "</s>" not in text[0]


def test_export_hf_average_and_check_none(hf_run: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["export", str(hf_run), "-o", str(tmp_path / "x"), "--to", "hf", "--average", "2",
                                      "--check", "none"])
    assert result.exit_code == 0, result.output
    assert "average of" in result.output and "parity" not in result.output


def test_export_hf_refuses_quantization(hf_run: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["export", str(hf_run), "-o", str(tmp_path / "x"), "--to", "hf",
                                      "--quantization", "int8"])
    assert result.exit_code != 0 and "applies to --to ctranslate2" in result.output
    assert not (tmp_path / "x").exists()


def test_default_eps_post_norm_exports_to_marian_with_parity(tiny_run: Path, tmp_path: Path) -> None:
    """tiny_run is post-norm at tbuild's default LayerNorm eps (1e-6); MarianMTModel's is 1e-5: the export
    rescales each stack's stream (export/hf.py) and the parity report holds."""
    out = tmp_path / "hf"
    result = CliRunner().invoke(app, ["export", str(tiny_run), "-o", str(out), "--to", "hf", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "(greedy, both sides: 100.0%)" in flat, result.output
    assert float(result.output.split("teacher-forced (up to 16 lines): ")[1].split()[0]) < 1e-4
    assert json.loads((out / "config.json").read_text())["architectures"] == ["MarianMTModel"]


def test_unrepresentable_model_is_one_line_and_exit_code_2(hf_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    spec = yaml.safe_load((hf_run / "spec.yaml").read_text())
    spec["model"]["positional"] = {"kind": "learned"}  # MarianMTModel's positions are its fixed sinusoid
    (run / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = CliRunner().invoke(app, ["export", str(run), "-o", str(tmp_path / "x"), "--to", "hf"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "hf needs" in lines[0]
    assert "cannot export to hf: model.positional learned (MarianMTModel's positions are a fixed sinusoid" in lines[0]
    assert not (tmp_path / "x").exists()


def test_refused_kind_is_one_line_and_exit_code_2(hf_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    spec = yaml.safe_load((hf_run / "spec.yaml").read_text())
    spec["model"]["ffn"] = {"kind": "swiglu"}
    (run / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = CliRunner().invoke(app, ["export", str(run), "-o", str(tmp_path / "x"), "--to", "hf"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "ffn kind 'swiglu'" in lines[0]
    assert "(the BART-family classes, Marian's, Pegasus's, BART's: relu, gelu, gelu_tanh, silu" in lines[0]  # T5's kind
