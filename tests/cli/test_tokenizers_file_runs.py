"""Runs whose tokenizer is a Hugging Face tokenizers file (an imported GPT-2 with its byte-level BPE
tokenizer.json): tbuild merge of adapters trained on it keeps it as tokenizer.json (not as an spm.model holding
JSON), generates what the adapter run generates and exports; a --peft its model kind cannot take is refused before
anything is written; train.init.vocab extend from it is refused before the run trains a tokenizer of its own; a
CTranslate2 export copies one named by data.tokenizer.model as tokenizer.json."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tests.conftest import tiny_train_spec

transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install -e '.[export]')")
pytest.importorskip("tokenizers", reason="tokenizers not installed (pip install -e '.[export]')")

from tests.engine.hf.test_import_hf import GPT2, _import, _perturbed  # noqa: E402
from tests.engine.hf.test_imported_runs import BPE_ROWS, LINES, PROMPTS, byte_level_bpe  # noqa: E402

runner = CliRunner()


def _ok(args: list[str], text: str | None = None) -> str:
    result = runner.invoke(app, args, input=text)
    assert result.exit_code == 0, result.output
    return result.stdout


def _tuned(root: Path, name: str, **train: object) -> Path:
    """A spec of root/run's model on root's text files, started from root/run with ``train``'s fields."""
    spec = yaml.safe_load((root / "run" / "spec.yaml").read_text())
    spec |= {"name": name, "output_dir": str(root / name)}
    spec["data"] |= {"train": str(root / "train.txt"), "valid": str(root / "valid.txt")}
    spec["train"] = {"max_steps": 2, "validate_every": 2, "log_every": 1, "threads": 1, "precision": "fp32",
                     "batch_tokens": 64, "schedule": {"kind": "inverse_sqrt", "lr": 0.05, "warmup": 1}, **train}
    (root / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    return root / f"{name}.yaml"


@pytest.fixture(scope="module")
def adapted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """root/lora: LoRA adapters trained 2 steps on root/run, a GPT-2 imported with a tokenizer.json."""
    root = tmp_path_factory.mktemp("tokenizers_file")
    torch.manual_seed(0)
    hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(**(GPT2 | {"vocab_size": BPE_ROWS, "n_positions": 64})))
    _perturbed(hf).save_pretrained(root / "hf")
    byte_level_bpe(root / "hf" / "tokenizer.json", ["<pad>", "<unk>", "<s>", "</s>"])
    _import(root / "hf", root / "run")
    for split in ("train", "valid"):
        (root / f"{split}.txt").write_text("\n".join(LINES) + "\n")
    _ok(["train", str(_tuned(root, "lora", init={"from": str(root / "run")},
                             adapters={"kind": "lora", "r": 2, "alpha": 4, "targets": ["attention"]}))])
    return root / "lora"


def test_the_merged_run_keeps_tokenizer_json_and_generates_and_exports(adapted: Path, tmp_path: Path) -> None:
    out = tmp_path / "merged"
    said = _ok(["merge", str(adapted), "-o", str(out)])
    assert "tokenizer.json" in said
    assert sorted(p.name for p in out.iterdir()) == ["best.safetensors", "spec.yaml", "tokenizer.json"]
    base = adapted.parent / "run" / "tokenizer.json"
    assert (out / "tokenizer.json").read_bytes() == base.read_bytes()
    prompts = "\n".join(PROMPTS) + "\n"
    args = ["--beam", "1", "--max-new-tokens", "5", "--device", "cpu"]
    merged = _ok(["generate", str(out), *args], prompts).splitlines()[-len(PROMPTS):]
    assert merged == _ok(["generate", str(adapted), *args], prompts).splitlines()[-len(PROMPTS):]
    _ok(["export", str(out), "--to", "hf", "-o", str(tmp_path / "hf")])
    assert (tmp_path / "hf" / "tokenizer.json").read_bytes() == base.read_bytes()


def test_a_peft_the_kind_cannot_take_writes_nothing(adapted: Path, tmp_path: Path) -> None:
    """A GPT-2 run's adapters on w_q have no peft names (GPT-2 fuses Q, K and V in c_attn): refused in one line,
    neither folder written."""
    result = runner.invoke(app, ["merge", str(adapted), "-o", str(tmp_path / "merged"), "--peft", str(tmp_path / "p")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.strip().splitlines() == [
        "error: --peft: decoder.0.self_attn.sublayer.w_q has no weight of its own in the Hugging Face model"]
    assert not (tmp_path / "merged").exists() and not (tmp_path / "p").exists()


def test_extending_a_tokenizers_file_is_refused_before_a_tokenizer_is_trained(adapted: Path) -> None:
    root = adapted.parent
    spec = _tuned(root, "extended", init={"from": str(root / "run"), "vocab": "extend"})
    data = yaml.safe_load(spec.read_text())
    data["model"]["vocab_size"], data["data"]["tokenizer"]["vocab_size"] = "from_tokenizer", 40
    spec.write_text(yaml.safe_dump(data))
    for command in ("inspect", "train"):
        result = runner.invoke(app, [command, str(spec)])
        assert result.exit_code == 2 and "training a bpe model" not in result.output, result.output
        assert result.output.strip().splitlines()[-1].endswith(
            "train.init.vocab extend: the source's tokenizer "
            f"{root / 'run' / 'tokenizer.json'} is a tokenizers file, and extend appends sentencepiece pieces; "
            "use vocab: refuse (its tokenizer) or remap")
        assert not (root / "extended").exists()



def test_a_ctranslate2_export_names_a_named_tokenizers_file_as_one(tiny_corpus: Path, tmp_path: Path) -> None:
    """A translator trained with data.tokenizer.model naming a tokenizer.json (none in its folder): the export's
    copy is tokenizer.json, not spm.model."""
    pytest.importorskip("ctranslate2", reason="ctranslate2 not installed (pip install -e '.[export]')")
    byte_level_bpe(tmp_path / "tokenizer.json", ["<pad>", "<unk>", "<s>", "</s>"])
    spec = tiny_train_spec(tiny_corpus, tmp_path / "run", max_steps=2, validate_every=2)
    spec["data"]["tokenizer"] |= {"model": str(tmp_path / "tokenizer.json"), "vocab_size": BPE_ROWS}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    _ok(["train", str(tmp_path / "spec.yaml")])
    assert not (tmp_path / "run" / "tokenizer.json").exists() and not (tmp_path / "run" / "spm.model").exists()
    _ok(["export", str(tmp_path / "run"), "--to", "ctranslate2", "-o", str(tmp_path / "ct2"), "--check", "none"])
    assert (tmp_path / "ct2" / "tokenizer.json").read_bytes() == (tmp_path / "tokenizer.json").read_bytes()
    assert not (tmp_path / "ct2" / "spm.model").exists()
