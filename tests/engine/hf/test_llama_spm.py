"""A decoder-only folder numbered as Llama's and Mistral's are published (no download): tokenizer.model with
``<unk>`` 0, ``<s>`` 1, ``</s>`` 2 and no padding piece, config.json's ``pad_token_id`` unset. The import keeps
the folder's ids (its record: unk 0, bos 1, eos 2, no pad; nothing added): text encodes to the folder's ids, the
logits and log-probabilities are HF's within 1e-4 on every row, and `tbuild generate` gives HF's greedy text.
The hf export is numbered as the published folder (its tokenizer.model Llama's), computes its logits and imports
back to the same run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.engine.data.tokenizer import Tokenizer
from tbuild.engine.run.directory import resolve_run

from .test_import_hf import _assert_round_trip

transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install -e '.[export]')")
spm = pytest.importorskip("sentencepiece")

LINES = ["the cat sat on the mat", "a dog ran far away", "cats and dogs play", "the red car is fast"]
LLAMA = {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 32,
         "max_position_embeddings": 32, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": None}


def _folder(root: Path, tied: bool, tokenizer_config: dict | None = None) -> Path:
    """A random LlamaForCausalLM with a sentencepiece model numbered as sentencepiece numbers by default (and
    ``tokenizer_config``, written as the folder's tokenizer_config.json)."""
    spm.SentencePieceTrainer.train(sentence_iterator=iter(LINES * 20), model_prefix=str(root / "sp"), vocab_size=40,
                                   model_type="bpe", character_coverage=1.0, hard_vocab_limit=False)
    sp = spm.SentencePieceProcessor(model_file=str(root / "sp.model"))
    assert (sp.unk_id(), sp.bos_id(), sp.eos_id(), sp.pad_id()) == (0, 1, 2, -1)
    config = transformers.LlamaConfig(vocab_size=sp.get_piece_size(), tie_word_embeddings=tied,
                                      num_key_value_heads=2, **LLAMA)
    torch.manual_seed(0)
    hf = transformers.LlamaForCausalLM(config)
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(3)) * 0.3)
    folder = root / "hf"
    hf.eval().save_pretrained(folder)
    (folder / "tokenizer.model").write_bytes((root / "sp.model").read_bytes())
    if tokenizer_config is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    result = CliRunner().invoke(app, ["import", "hf", str(folder), "-o", str(root / "run")])
    assert result.exit_code == 0, result.output
    return root


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_llama_numbering_imports_in_its_own_ids(tied: bool, tmp_path: Path) -> None:
    from tbuild.builder import build_model
    from tbuild.engine.run.weights import load_weights

    root = _folder(tmp_path, tied)
    hf = transformers.LlamaForCausalLM.from_pretrained(root / "hf").eval()
    sp = spm.SentencePieceProcessor(model_file=str(root / "sp.model"))
    run = resolve_run(root / "run")
    special = run.spec.special()
    assert (special.pad, special.unk, special.bos, special.eos) == (None, 0, 1, 2)
    assert run.spec.model.vocab_size == run.spec.data.tokenizer.vocab_size == sp.get_piece_size()  # no row added
    tok = Tokenizer.load(run.tokenizer, run.spec.data.tokenizer.special)
    for line in [*LINES, "unseen: xyz ü"]:
        assert tok.encode([line])[0] == sp.encode(line)  # the folder's ids
    model = build_model(run.spec)
    load_weights(model, run)
    ids = torch.tensor([[1] + torch.randint(3, sp.get_piece_size(), (10,), generator=torch.Generator()).tolist()])
    with torch.no_grad():
        ours = model.eval().decode(ids)
        theirs = hf(input_ids=ids).logits
    assert (ours - theirs).abs().max().item() < 1e-4  # every row
    assert (ours.log_softmax(-1) - theirs.log_softmax(-1)).abs().max().item() < 1e-4


@pytest.mark.parametrize("bos", [True, False], ids=["add_bos_token", "nothing_added"])
def test_generate_on_a_llama_numbered_run_gives_hf_greedy_text(bos: bool, tmp_path: Path) -> None:
    """The prompt is what the folder's own tokenizer gives (BOS first where tokenizer_config.json's add_bos_token
    says so, nothing added where the folder says nothing, as transformers' AutoTokenizer reads it)."""
    root = _folder(tmp_path, tied=False, tokenizer_config={"add_bos_token": True} if bos else None)
    hf = transformers.LlamaForCausalLM.from_pretrained(root / "hf").eval()
    sp = spm.SentencePieceProcessor(model_file=str(root / "sp.model"))
    own = transformers.AutoTokenizer.from_pretrained(str(root / "hf"))
    prompts = ["the cat", "a dog ran"]
    result = CliRunner().invoke(app, ["generate", str(root / "run"), "--beam", "1", "--max-new-tokens", "8",
                                      "--device", "cpu"], input="\n".join(prompts) + "\n")
    assert result.exit_code == 0, result.output
    for prompt, line in zip(prompts, result.output.splitlines()[-2:], strict=True):
        ids = own(prompt)["input_ids"]
        assert ids == [1] * bos + sp.encode(prompt)
        out = hf.generate(input_ids=torch.tensor([ids]), num_beams=1, do_sample=False, max_new_tokens=8,
                          eos_token_id=2, pad_token_id=0)[0].tolist()
        assert len(out) > len(ids) and sp.decode(out) == line, str(out)


def test_a_config_whose_ids_are_not_the_tokenizers_is_refused(tmp_path: Path) -> None:
    root = _folder(tmp_path, tied=True)
    config = (root / "hf" / "config.json").read_text().replace('"eos_token_id": 2', '"eos_token_id": 5')
    (root / "hf" / "config.json").write_text(config)
    result = CliRunner().invoke(app, ["import", "hf", str(root / "hf"), "-o", str(tmp_path / "again")])
    assert result.exit_code != 0 and "config.json eos_token_id 5" in result.output
    assert not (tmp_path / "again").exists()


def test_export_to_hf_is_numbered_as_the_published_folder_again(tmp_path: Path) -> None:
    root = _folder(tmp_path, tied=True)
    (tmp_path / "valid.txt").write_text("\n".join(LINES) + "\n")
    result = CliRunner().invoke(app, ["export", str(root / "run"), "--to", "hf", "-o", str(tmp_path / "out"),
                                      "--set", f"data.valid={tmp_path / 'valid.txt'}"])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "graph-parity.json").read_text())
    assert report["max_logit_diff"] < 1e-4 and report["identical"] == 1.0
    sp, ours = (spm.SentencePieceProcessor(model_file=str(f)) for f in (root / "sp.model", tmp_path / "out" /
                                                                           "tokenizer.model"))
    assert (ours.unk_id(), ours.bos_id(), ours.eos_id(), ours.pad_id()) == (0, 1, 2, -1)
    assert [ours.id_to_piece(i) for i in range(ours.get_piece_size())] == [
        sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    hf = transformers.LlamaForCausalLM.from_pretrained(root / "hf").eval()
    exported = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "out").eval()
    ids = torch.tensor([[1, *transformers.AutoTokenizer.from_pretrained(tmp_path / "out")(LINES[1])["input_ids"]]])
    assert ids[0, 1:].tolist() == sp.encode(LINES[1])
    with torch.no_grad():
        assert (exported(input_ids=ids).logits - hf(input_ids=ids).logits).abs().max().item() < 1e-4
    _assert_round_trip(tmp_path)
