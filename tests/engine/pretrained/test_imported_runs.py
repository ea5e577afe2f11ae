"""An imported run is an ordinary run: a tiny GPT2LMHeadModel shipped with a byte-level BPE tokenizer.json (no
sentencepiece model, as GPT-2's own folders) is imported, and every command works on it from raw text: `inspect`,
`generate` (Hugging Face's greedy tokens for the same text), `evaluate`, `serve` (the test client's answers are
`tbuild generate`'s), `export` (hf, which imports back to the same weights; ctranslate2 where installed) and
`train` with `train.init` pointing at it. A tokenizer.json without tbuild's special ids is refused naming it."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from tbuild.builder.tokens import BOS, EOS, PAD
from tbuild.cli.app import app

from .test_import_hf import GPT2, _assert_round_trip, _import, _loaded, _perturbed, _refused

transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install -e '.[export]')")
tokenizers = pytest.importorskip("tokenizers", reason="tokenizers not installed (pip install -e '.[export]')")

runner = CliRunner()
LINES = ["the cat sat on the mat", "a dog ran in the park", "Zwei Hunde spielen im Schnee", "über den Fluss"]
PROMPTS = ["the cat", "Zwei Hunde", "über"]
BPE_ROWS = 300


def byte_level_bpe(path: Path, specials: list[str]) -> tokenizers.Tokenizer:
    """GPT-2's kind of tokenizer (byte-level BPE) trained on LINES, ``specials`` at ids 0, 1, ..."""
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tk = tokenizers.Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=BPE_ROWS, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tk.train_from_iterator(LINES * 20, trainer)
    tk.save(str(path))
    return tk


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201 - (root, HF model, tokenizers.Tokenizer)
    root = tmp_path_factory.mktemp("imported")
    folder = root / "hf"
    torch.manual_seed(0)
    config = transformers.GPT2Config(**(GPT2 | {"vocab_size": BPE_ROWS, "n_positions": 64}))
    hf = _perturbed(transformers.GPT2LMHeadModel(config))
    hf.save_pretrained(folder)
    tk = byte_level_bpe(folder / "tokenizer.json", ["<pad>", "<unk>", "<s>", "</s>"])
    assert "decoder_only" in _import(folder, root / "run")
    assert (root / "run" / "tokenizer.json").is_file() and not (root / "run" / "spm.model").exists()
    for split in ("train", "valid", "test"):
        (root / f"{split}.txt").write_text("\n".join(LINES) + "\n")
    return root, hf, tk


def _ok(args: list[str], text: str | None = None) -> str:
    result = runner.invoke(app, args, input=text)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_generate_on_raw_text_gives_hf_greedy_tokens(imported) -> None:  # noqa: ANN001
    root, hf, tk = imported
    ours = _ok(["generate", str(root / "run"), "--beam", "1", "--max-new-tokens", "6", "--device", "cpu"],
               "\n".join(PROMPTS) + "\n").splitlines()[-len(PROMPTS):]
    for prompt, line in zip(PROMPTS, ours, strict=True):
        ids = [BOS, *tk.encode(prompt, add_special_tokens=False).ids]
        out = hf.generate(input_ids=torch.tensor([ids]), num_beams=1, do_sample=False, max_new_tokens=6,
                          suppress_tokens=[PAD, BOS], eos_token_id=EOS, pad_token_id=PAD)[0].tolist()
        assert len(out) > len(ids) and line == tk.decode([i for i in out if i not in (PAD, BOS, EOS)])
    _, model = _loaded(root / "run")
    ids = torch.tensor([[BOS, *tk.encode(LINES[0], add_special_tokens=False).ids]])
    with torch.no_grad():
        assert (model.decode(ids) - hf(input_ids=ids).logits).abs().max().item() < 1e-4


def test_inspect_evaluate_and_serve_work_on_the_imported_run(imported) -> None:  # noqa: ANN001
    root, _, _ = imported
    run = str(root / "run")
    assert "decoder" in _ok(["inspect", run])
    result = _ok(["evaluate", run, "--split", "test", "--set", f"data.test={root / 'test.txt'}", "--device", "cpu"])
    assert "perplexity" in result.lower()
    pytest.importorskip("fastapi", reason="tbuild serve needs the serve extra (pip install 'tbuild[serve]')")
    from fastapi.testclient import TestClient

    from tbuild.engine.run_dir import resolve_run
    from tbuild.engine.serving.app import create_app
    from tbuild.engine.serving.service import open_service

    service = open_service(resolve_run(root / "run"), max_wait_ms=5, max_lines=8, max_chars=200)
    try:
        with TestClient(create_app(service)) as client:
            answer = client.post("/generate", json={"prompts": PROMPTS, "max_new_tokens": 4}).json()
    finally:
        service.close()
    want = _ok(["generate", run, "--max-new-tokens", "4", "--device", "cpu"], "\n".join(PROMPTS) + "\n")
    assert answer == {"outputs": want.splitlines()[-len(PROMPTS):]}


def test_export_hf_imports_back_and_ctranslate2_loads(imported, tmp_path: Path) -> None:  # noqa: ANN001
    root, _, tk = imported
    (tmp_path / "run").symlink_to(root / "run")
    _assert_round_trip(tmp_path, architecture=False)
    assert (tmp_path / "again" / "tokenizer.json").read_bytes() == (root / "run" / "tokenizer.json").read_bytes()
    if importlib.util.find_spec("ctranslate2") is None:
        pytest.skip("ctranslate2 not installed (pip install -e '.[export]')")
    import ctranslate2

    _ok(["export", str(root / "run"), "--to", "ctranslate2", "-o", str(tmp_path / "ct2"), "--check", "none"])
    generator = ctranslate2.Generator(str(tmp_path / "ct2"), device="cpu")
    pieces = [tk.id_to_token(i) for i in [BOS, *tk.encode(PROMPTS[0], add_special_tokens=False).ids]]
    assert generator.generate_batch([pieces], max_length=4, sampling_topk=1)[0].sequences_ids[0]


def test_train_from_the_imported_run(imported, tmp_path: Path) -> None:  # noqa: ANN001
    root, _, _ = imported
    spec = yaml.safe_load((root / "run" / "spec.yaml").read_text())
    spec |= {"name": "tuned", "output_dir": str(tmp_path / "tuned")}
    spec["data"] |= {"train": str(root / "train.txt"), "valid": str(root / "valid.txt")}
    spec["train"] = {"max_steps": 2, "validate_every": 2, "log_every": 1, "threads": 1, "precision": "fp32",
                     "batch_tokens": 64, "init": {"from": str(root / "run")}}
    (tmp_path / "tuned.yaml").write_text(yaml.safe_dump(spec))
    _ok(["train", str(tmp_path / "tuned.yaml")])
    assert (tmp_path / "tuned" / "tokenizer.json").read_bytes() == (root / "run" / "tokenizer.json").read_bytes()
    assert (tmp_path / "tuned" / "best.safetensors").is_file()
    assert _ok(["generate", str(tmp_path / "tuned"), "--max-new-tokens", "3", "--device", "cpu"], "the cat\n")


def test_a_tokenizer_json_without_tbuild_s_special_ids_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "hf"
    transformers.GPT2LMHeadModel(transformers.GPT2Config(**(GPT2 | {"vocab_size": BPE_ROWS}))).save_pretrained(folder)
    byte_level_bpe(folder / "tokenizer.json", ["<|endoftext|>"])
    _refused([str(folder)], tmp_path / "run", "tokenizer.json: ids 0 to 3 are not all special tokens")
    (folder / "tokenizer.json").write_text(json.dumps({"model": "not one"}))
    _refused([str(folder)], tmp_path / "run", "tokenizer.json: not a readable tokenizers file")
