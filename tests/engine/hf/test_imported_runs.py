"""An imported run is an ordinary run: a tiny GPT2LMHeadModel shipped with a byte-level BPE tokenizer.json (no
sentencepiece model, as GPT-2's own folders) is imported, and every command works on it from raw text: `inspect`,
`generate` (Hugging Face's greedy tokens for the same text), `evaluate`, `serve` (the test client's answers are
`tbuild generate`'s), `export` (hf, which imports back to the same weights; ctranslate2 where installed) and
`train` with `train.init` pointing at it; so on an imported BERT tagger (decode, evaluate, serve at /classify,
export to BertForTokenClassification, train) and an imported Marian model (evaluate, serve at /translate,
export to CTranslate2 with its parity check). config.json ids that are not special tokens of the tokenizer.json
are refused naming the field."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.components.specs.special import BOS, EOS, PAD

from .test_import_encoder import LABELS, encoder_folder
from .test_import_hf import GPT2, _assert_round_trip, _import, _loaded, _perturbed, _refused, seq2seq_folder

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
        ids = tk.encode(prompt).ids  # the tokenizer's own encoding: it adds nothing (no post-processor)
        out = hf.generate(input_ids=torch.tensor([ids]), num_beams=1, do_sample=False, max_new_tokens=6,
                          eos_token_id=EOS, pad_token_id=PAD)[0].tolist()
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

    from tbuild.engine.run.directory import resolve_run
    from tbuild.engine.serving.app import create_app
    from tbuild.engine.tasks.service import open_service

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


def test_config_ids_that_are_not_special_tokens_are_refused(tmp_path: Path) -> None:
    """config.json naming ordinary pieces as BOS and EOS (tbuild's ids 2 and 3 in a file with one special token,
    <|endoftext|> at 0): one line naming the field; then an unreadable file."""
    folder = tmp_path / "hf"
    transformers.GPT2LMHeadModel(transformers.GPT2Config(**(GPT2 | {"vocab_size": BPE_ROWS}))).save_pretrained(folder)
    byte_level_bpe(folder / "tokenizer.json", ["<|endoftext|>"])
    _refused([str(folder)], tmp_path / "run", "config.json bos_token_id 2: not one of the tokenizer's special tokens")
    (folder / "tokenizer.json").write_text(json.dumps({"model": "not one"}))
    _refused([str(folder)], tmp_path / "run", "tokenizer.json: not a readable tokenizers file")


def _serve(run: Path, path: str, body: dict) -> dict:
    """``body`` posted at ``path`` of ``tbuild serve RUN`` (FastAPI's test client)."""
    pytest.importorskip("fastapi", reason="tbuild serve needs the serve extra (pip install 'tbuild[serve]')")
    from fastapi.testclient import TestClient

    from tbuild.engine.run.directory import resolve_run
    from tbuild.engine.serving.app import create_app
    from tbuild.engine.tasks.service import open_service

    service = open_service(resolve_run(run), max_wait_ms=5, max_lines=8, max_chars=200)
    try:
        with TestClient(create_app(service)) as client:
            response = client.post(path, json=body)
    finally:
        service.close()
    assert response.status_code == 200, response.text
    return response.json()


WORDS, TAGS = "ab ba cab\ncc aab\nb bbc a a\n", "NOUN VERB DET\nDET NOUN\nVERB NOUN DET DET\n"


def test_every_command_on_an_imported_bert_tagger(spm, tmp_path: Path) -> None:  # noqa: ANN001
    encoder_folder("bert", "BertForTokenClassification", LABELS, spm, tmp_path / "hf")
    _import(tmp_path / "hf", tmp_path / "run")
    run = str(tmp_path / "run")
    for split in ("train", "valid", "test"):
        (tmp_path / f"{split}.words").write_text(WORDS)
        (tmp_path / f"{split}.tags").write_text(TAGS)
    assert "output head" in _ok(["inspect", run])
    tags = [line.split() for line in _ok(["decode", run, "--device", "cpu"], WORDS).splitlines()[-3:]]
    assert [len(t) for t in tags] == [3, 2, 4] and {t for line in tags for t in line} <= {"NOUN", "VERB", "DET"}
    data = [f"data.{split}={tmp_path / split}" for split in ("train", "valid", "test")]
    assert "accuracy" in _ok(["evaluate", run, "--split", "test", "--device", "cpu",
                              *(arg for d in data for arg in ("--set", d))])
    assert _serve(tmp_path / "run", "/classify", {"texts": WORDS.splitlines()}) == {"tags": tags}
    _assert_round_trip(tmp_path)  # export --to hf (BertForTokenClassification) and back
    spec = yaml.safe_load((tmp_path / "run" / "spec.yaml").read_text())
    spec |= {"name": "tuned", "output_dir": str(tmp_path / "tuned")}
    spec["data"] |= {split: str(tmp_path / split) for split in ("train", "valid", "test")}
    spec["train"] = {"max_steps": 2, "validate_every": 2, "log_every": 1, "threads": 1, "precision": "fp32",
                     "init": {"from": run, "freeze": ["embeddings"]}}
    (tmp_path / "tuned.yaml").write_text(yaml.safe_dump(spec))
    _ok(["train", str(tmp_path / "tuned.yaml")])
    assert (tmp_path / "tuned" / "best.safetensors").is_file()


def test_evaluate_serve_and_ctranslate2_on_an_imported_marian_model(spm, tmp_path: Path) -> None:  # noqa: ANN001
    seq2seq_folder("marian", {}, spm, tmp_path / "hf")
    _import(tmp_path / "hf", tmp_path / "run")
    run = str(tmp_path / "run")
    lines = ["ab ba cab", "cc aab bbc a"]
    (tmp_path / "src.txt").write_text("\n".join(lines) + "\n")
    (tmp_path / "ref.txt").write_text("ab ba\ncc a\n")
    decoded = _ok(["decode", run, "--beam", "2", "--device", "cpu"], "\n".join(lines) + "\n").splitlines()[-2:]
    assert "BLEU" in _ok(["evaluate", run, "--src", str(tmp_path / "src.txt"), "--ref", str(tmp_path / "ref.txt"),
                          "--beam", "2", "--device", "cpu"])
    assert _serve(tmp_path / "run", "/translate", {"src": lines, "beam": 2})["translations"] == decoded
    if importlib.util.find_spec("ctranslate2") is None:
        pytest.skip("ctranslate2 not installed (pip install -e '.[export]')")
    _ok(["export", run, "--to", "ctranslate2", "-o", str(tmp_path / "ct2"), "--check-src", str(tmp_path / "src.txt"),
         "--check-ref", str(tmp_path / "ref.txt")])
    assert (tmp_path / "ct2" / "model.bin").is_file()


def test_an_imported_masked_lm_starts_a_tagger(spm, tmp_path: Path) -> None:  # noqa: ANN001
    """BERT's use: its pretrained encoder (embeddings with their norm, layers) loads into a tagger; the masked
    LM's head (transform and output layer) is left out and the tagger's head starts new."""
    encoder_folder("bert", "BertForMaskedLM", {}, spm, tmp_path / "hf")
    _import(tmp_path / "hf", tmp_path / "mlm")
    for split in ("train", "valid"):
        (tmp_path / f"{split}.words").write_text(WORDS)
        (tmp_path / f"{split}.tags").write_text(TAGS)
    spec = yaml.safe_load((tmp_path / "mlm" / "spec.yaml").read_text())
    spec |= {"name": "tagger", "output_dir": str(tmp_path / "tagger")}
    spec["model"] |= {"head": {"kind": "token_classification"}, "tie_embeddings": "none"}
    spec["data"] |= {"dataset": {"kind": "tagging", "source": "files"}, "train": str(tmp_path / "train"),
                     "valid": str(tmp_path / "valid")}
    spec["train"] = {"max_steps": 2, "validate_every": 2, "log_every": 1, "threads": 1, "precision": "fp32",
                     "init": {"from": str(tmp_path / "mlm")}}
    (tmp_path / "tagger.yaml").write_text(yaml.safe_dump(spec))
    out = _ok(["train", str(tmp_path / "tagger.yaml")])
    assert "src_embed" in out and "head: the source's is a MaskedLM, this model's a TokenClassification" in out
    tags = _ok(["decode", str(tmp_path / "tagger"), "--device", "cpu"], WORDS).splitlines()[-3:]
    assert [len(line.split()) for line in tags] == [3, 2, 4]
