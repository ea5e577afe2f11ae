"""Published encoders number their special tokens their own way: BERT's WordPiece ([PAD] 0, [UNK] 100, [CLS] 101,
[SEP] 102) and RoBERTa's byte-level BPE (<s> 0, <pad> 1, </s> 2, <unk> 3). Tiny models built that way (random
weights, no download) import: the tokenizer.json is renumbered to tbuild's PAD 0, UNK 1, BOS 2, EOS 3, the
vocabulary rows move alike, and tbuild's scores on raw text equal the Hugging Face model's on its own tokens
(1e-4, float32); `tbuild decode` on the tagger gives HF's labels (each word's first piece, [CLS] read first).
Export and import again is the identity. A model whose special tokens cannot be told apart is refused in one
line naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tbuild.components.specs.special import BOS, EOS
from tbuild.cli.app import app
from tbuild.engine.data.tokenizer import Tokenizer
from tbuild.engine.pretrained.hf_ids import renumbered_file, renumbering

from .test_import_encoder import BERT, LABELS
from .test_import_hf import _assert_round_trip, _import, _loaded, _perturbed, _refused
from .test_imported_runs import LINES, byte_level_bpe

transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install -e '.[export]')")
tokenizers = pytest.importorskip("tokenizers", reason="tokenizers not installed (pip install -e '.[export]')")

WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "in", "park", "##s", "##ing", "z", "##w", "##ei"]
BERT_VOCAB = ["[PAD]", "[unused0]", "[unused1]", "[unused2]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
TEXTS = ["the cat sat on the mat", "a dogs ran in the parking zwei", "über"]


def _wordpiece(folder: Path) -> tokenizers.Tokenizer:
    """BERT's kind of tokenizer.json, its special tokens where BERT has them (not at 0-3), with the files that
    name them."""
    from tokenizers import decoders, models, normalizers, pre_tokenizers, processors

    vocab = {piece: i for i, piece in enumerate(BERT_VOCAB)}
    tk = tokenizers.Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tk.normalizer = normalizers.BertNormalizer(lowercase=True)
    tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tk.decoder = decoders.WordPiece()
    tk.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tk.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 5),
                                                                                                ("[SEP]", 6)])
    tk.save(str(folder / "tokenizer.json"))
    names = {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]",
             "mask_token": "[MASK]"}
    (folder / "special_tokens_map.json").write_text(json.dumps(names))
    return tk


def _hf_scores(hf: torch.nn.Module, tk: tokenizers.Tokenizer, text: str) -> torch.Tensor:
    ids = torch.tensor([tk.encode(text).ids])
    with torch.no_grad():
        return hf(input_ids=ids).logits[0]


def _hf_tags(hf: torch.nn.Module, tk: tokenizers.Tokenizer, text: str) -> list[str]:
    """What a Hugging Face token-classification pipeline reads: each word's label at its first piece."""
    encoding, scores = tk.encode(text), _hf_scores(hf, tk, text)
    first = {w: i for i, w in reversed(list(enumerate(encoding.word_ids))) if w is not None}
    return [hf.config.id2label[int(scores[first[w]].argmax())] for w in sorted(first)]


def _our_scores(run: Path, text: str) -> torch.Tensor:
    spec, model = _loaded(run)
    tok = Tokenizer.load(run / "tokenizer.json")
    with torch.no_grad():
        return model(torch.tensor([[BOS, *tok.encode([text])[0], EOS]]))[0]


def test_a_bert_tagger_with_bert_s_ids_imports_and_scores_as_hf(tmp_path: Path) -> None:
    folder = tmp_path / "hf"
    folder.mkdir()
    tk = _wordpiece(folder)
    torch.manual_seed(0)
    config = transformers.BertConfig(**(BERT | {"vocab_size": len(BERT_VOCAB)} | LABELS))
    hf = _perturbed(transformers.BertForTokenClassification(config))
    hf.save_pretrained(folder)
    _import(folder, tmp_path / "run")
    ours_tok = Tokenizer.load(tmp_path / "run" / "tokenizer.json")
    assert [ours_tok.sp.id_to_piece(i) for i in range(4)] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    assert ours_tok.encode(["zzz"])[0] == [1]  # an unknown word: tbuild's UNK
    for text in TEXTS:
        assert (_our_scores(tmp_path / "run", text) - _hf_scores(hf, tk, text)).abs().max().item() < 1e-4
    result = CliRunner().invoke(app, ["decode", str(tmp_path / "run"), "--device", "cpu"], input="\n".join(TEXTS))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-len(TEXTS):] == [" ".join(_hf_tags(hf, tk, text)) for text in TEXTS]
    _assert_round_trip(tmp_path)  # exported with tbuild's ids, imported back unchanged


def test_a_roberta_masked_lm_with_roberta_s_ids_imports_and_scores_as_hf(tmp_path: Path) -> None:
    folder = tmp_path / "hf"
    folder.mkdir()
    tk = byte_level_bpe(folder / "tokenizer.json", ["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    tk.post_processor = tokenizers.processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    tk.save(str(folder / "tokenizer.json"))
    rows = tk.get_vocab_size()
    torch.manual_seed(0)
    config = transformers.RobertaConfig(**(BERT | {"vocab_size": rows, "pad_token_id": 1, "bos_token_id": 0,
                                                   "eos_token_id": 2, "max_position_embeddings": 40,
                                                   "type_vocab_size": 1}))
    hf = _perturbed(transformers.RobertaForMaskedLM(config))
    hf.save_pretrained(folder)
    _import(folder, tmp_path / "run")
    order = renumbering({"pad": 1, "unk": 3, "bos": 0, "eos": 2}, rows).order
    for text in LINES[:3]:
        theirs = _hf_scores(hf, tk, text)[:, list(order)]  # HF's scores in tbuild's piece order
        assert (_our_scores(tmp_path / "run", text) - theirs).abs().max().item() < 1e-4


def test_renumbering_keeps_every_piece_and_its_post_processor() -> None:
    """The rewritten file holds the same pieces, each under its new id; the post-processor's ids follow."""
    data = {"model": {"type": "Unigram", "unk_id": 3, "vocab": [["<s>", 0.0], ["<pad>", 0.0], ["</s>", 0.0],
                                                                  ["<unk>", 0.0], ["a", -1.0], ["b", -2.0]]},
            "added_tokens": [{"id": i, "content": p, "special": True} for i, p in enumerate(["<s>", "<pad>", "</s>",
                                                                                              "<unk>"])],
            "post_processor": {"type": "Sequence", "processors": [{"type": "RobertaProcessing", "sep": ["</s>", 2],
                                                                   "cls": ["<s>", 0]}]}}
    numbering = renumbering({"pad": 1, "unk": 3, "bos": 0, "eos": 2}, 6)
    out = renumbered_file(data, numbering)
    assert [p for p, _ in out["model"]["vocab"]] == ["<pad>", "<unk>", "<s>", "</s>", "a", "b"]
    assert out["model"]["unk_id"] == 1
    assert [(t["id"], t["content"]) for t in out["added_tokens"]] == [(0, "<pad>"), (1, "<unk>"), (2, "<s>"),
                                                                      (3, "</s>")]
    assert out["post_processor"]["processors"][0]["sep"] == ["</s>", 3]
    assert out["post_processor"]["processors"][0]["cls"] == ["<s>", 2]
    assert torch.equal(numbering.rows(torch.arange(8)), torch.tensor([1, 3, 0, 2, 4, 5, 6, 7]))  # rows past 6 stay


def test_roles_without_a_token_of_their_own_get_copies() -> None:
    """GPT-2's numbering (one special token, the last, for BOS, EOS and UNK; no PAD): EOS keeps the token, PAD,
    UNK and BOS get copies of its row (the new ids the model never scores); the file gets their tokens."""
    numbering = renumbering({"pad": None, "unk": 4, "bos": 4, "eos": 4}, 5)
    assert numbering.order == (4, 4, 4, 4, 0, 1, 2, 3) and numbering.copies == {0, 1, 2} and numbering.added == 3
    assert numbering.new_ids() == {4: 3, 0: 4, 1: 5, 2: 6, 3: 7}
    data = {"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "<s>": 3, "<|endoftext|>": 4}, "merges": []},
            "added_tokens": [{"id": 4, "content": "<|endoftext|>", "special": True}]}
    out = renumbered_file(data, numbering)
    assert out["model"]["vocab"] == {"<pad>": 0, "<unk>": 1, "<s>_tbuild": 2, "<|endoftext|>": 3, "a": 4, "b": 5,
                                     "ab": 6, "<s>": 7}  # the file's own "<s>" kept: the copy's name moves aside
    assert [(t["id"], t["content"], t["special"]) for t in out["added_tokens"]] == [
        (0, "<pad>", True), (1, "<unk>", True), (2, "<s>_tbuild", True), (3, "<|endoftext|>", True)]
    assert torch.equal(numbering.rows(torch.arange(5)), torch.tensor([4, 4, 4, 4, 0, 1, 2, 3]))
    opus = renumbering({"pad": 7, "unk": 1, "bos": 7, "eos": 0}, 8)  # Marian's decoder starts from PAD: BOS a copy
    assert opus.order[:4] == (7, 1, 7, 0) and opus.copies == {2} and opus.new_ids()[7] == 0


def test_a_tokenizer_without_an_eos_or_with_an_id_it_lacks_is_refused(tmp_path: Path) -> None:
    """No end token anywhere (config.json, the tokenizer's files, the usual names), then a config id past the
    tokenizer's: one line naming the field, nothing written."""
    folder = tmp_path / "hf"
    folder.mkdir()
    tk = byte_level_bpe(folder / "tokenizer.json", ["<s>", "<pad>", "<unk>"])
    config = transformers.RobertaConfig(**(BERT | {"vocab_size": tk.get_vocab_size(), "pad_token_id": 1,
                                                   "bos_token_id": 0, "eos_token_id": None,
                                                   "max_position_embeddings": 40, "type_vocab_size": 1,
                                                   "architectures": ["RobertaForMaskedLM"]}))
    transformers.RobertaForMaskedLM(config).save_pretrained(folder)
    _refused([str(folder)], tmp_path / "run", "config.json eos_token_id: not set, and the tokenizer's files name no "
             "eos token; tbuild's decoders stop at EOS")
    config = json.loads((folder / "config.json").read_text()) | {"eos_token_id": 900}
    (folder / "config.json").write_text(json.dumps(config))
    _refused([str(folder)], tmp_path / "run", "config.json eos_token_id 900: not one of the tokenizer's special tokens")
