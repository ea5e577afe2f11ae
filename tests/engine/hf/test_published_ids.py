"""Published encoders number their special tokens their own way: BERT's WordPiece ([PAD] 0, [UNK] 100, [CLS] 101,
[SEP] 102) and RoBERTa's byte-level BPE (<s> 0, <pad> 1, </s> 2, <unk> 3). Tiny models built that way (random
weights, no download) import in their own ids: the tokenizer.json is the folder's, the run's record names each
role's id and what the tokenizer adds around a sequence (its post-processor: [CLS] … [SEP]), and tbuild's scores
on raw text equal the Hugging Face model's on its own tokens (1e-4, float32); `tbuild decode` on the tagger gives
HF's labels (each word's first piece, [CLS] read first). Export and import again is the identity. A model whose
special tokens cannot be told apart is refused in one line naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.engine.data.tokenizer import Tokenizer
from tbuild.engine.hf.special import role_ids, specials

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
    """The run's scores of ``text`` as its record adds around it (BERT's and RoBERTa's: bos, text, eos)."""
    spec, model = _loaded(run)
    tok = Tokenizer.load(run / "tokenizer.json", spec.data.tokenizer.special)
    with torch.no_grad():
        return model(torch.tensor([tok.special.wrap(tok.encode([text])[0])]))[0]


def test_a_bert_tagger_with_bert_s_ids_imports_and_scores_as_hf(tmp_path: Path) -> None:
    folder = tmp_path / "hf"
    folder.mkdir()
    tk = _wordpiece(folder)
    torch.manual_seed(0)
    config = transformers.BertConfig(**(BERT | {"vocab_size": len(BERT_VOCAB)} | LABELS))
    hf = _perturbed(transformers.BertForTokenClassification(config))
    hf.save_pretrained(folder)
    _import(folder, tmp_path / "run")
    assert (tmp_path / "run" / "tokenizer.json").read_bytes() == (folder / "tokenizer.json").read_bytes()
    special = _loaded(tmp_path / "run")[0].special()
    assert (special.pad, special.unk, special.bos, special.eos) == (0, 4, 5, 6)  # the folder's own ids
    assert special.source == ("bos", "text", "eos")  # its post-processor's [CLS] $A [SEP]
    ours_tok = Tokenizer.load(tmp_path / "run" / "tokenizer.json", special)
    assert ours_tok.encode(["zzz"])[0] == [4]  # an unknown word: the folder's [UNK]
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
    special = _loaded(tmp_path / "run")[0].special()
    assert (special.pad, special.unk, special.bos, special.eos, special.source) == (1, 3, 0, 2, ("bos", "text", "eos"))
    for text in LINES[:3]:  # every row, in the folder's ids
        assert (_our_scores(tmp_path / "run", text) - _hf_scores(hf, tk, text)).abs().max().item() < 1e-4


def test_roles_may_share_a_token_or_have_none(tmp_path: Path) -> None:
    """GPT-2's numbering: one special token (the last) for bos, eos and unk, no pad; the decoder starts from bos,
    which it never generates only where it is not EOS. Marian's: the decoder starts from pad (config.json's
    decoder_start_token_id)."""
    vocab = {"a": 0, "b": 1, "<|endoftext|>": 2}
    ids = role_ids(tmp_path, {"bos_token_id": 2, "eos_token_id": 2}, vocab, {2}, 2)
    assert ids == {"pad": None, "unk": 2, "bos": 2, "eos": 2}
    gpt2 = specials(ids, {}, ("text",))
    assert gpt2.start == gpt2.stop == 2 and gpt2.never == () and gpt2.fill == 2
    marian = specials({"pad": 7, "unk": 1, "bos": None, "eos": 0}, {"decoder_start_token_id": 7}, ("text", "eos"))
    assert marian.target == ("pad", "text", "eos") and marian.start == 7 and marian.never == (7,)


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


@pytest.mark.parametrize("lower", [None, False], ids=["unset", "do_lower_case false"])
def test_a_cased_bert_tokenizer_imports_where_transformers_reads_it_cased(lower: bool | None, tmp_path: Path) -> None:
    """tokenizer.json's normalizer keeps case; transformers 5's BertTokenizer lowercases unless tokenizer_config.json
    says do_lower_case false: unset, the folder's tok(text) is not its file's, refused in one line; set, imported,
    encoding as transformers does."""
    from tokenizers import normalizers

    folder = tmp_path / "hf"
    folder.mkdir()
    tk = _wordpiece(folder)
    tk.normalizer = normalizers.BertNormalizer(lowercase=False)
    tk.save(str(folder / "tokenizer.json"))
    if lower is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": lower}))
    torch.manual_seed(0)
    config = transformers.BertConfig(**(BERT | {"vocab_size": len(BERT_VOCAB)} | LABELS))
    _perturbed(transformers.BertForTokenClassification(config)).save_pretrained(folder)
    result = CliRunner().invoke(app, ["import", "hf", str(folder), "-o", str(tmp_path / "run")])
    if lower is None:
        assert result.exit_code == 2 and not (tmp_path / "run").exists()
        assert result.output.strip().splitlines() == [
            f"error: {folder}: BertTokenizer (transformers' AutoTokenizer on the folder) encodes \"The Café's NAÏVE "
            "ﬁancée\" as [5, 8, 4, 4, 4, 4, 4, 6], its tokenizer.json as [5, 4, 4, 4, 4, 4, 4, 6]; make "
            "tokenizer_config.json name the class and flags (do_lower_case, add_bos_token) that read the file as it "
            "is, e.g. tokenizer_class PreTrainedTokenizerFast"]  # "the" lowercased by transformers only
        return
    assert result.exit_code == 0, result.output
    special = _loaded(tmp_path / "run")[0].special()
    ours = Tokenizer.load(tmp_path / "run" / "tokenizer.json", special)
    theirs = transformers.AutoTokenizer.from_pretrained(str(folder))
    for text in [*TEXTS, "The Cat"]:
        assert special.wrap(ours.encode([text])[0]) == theirs(text)["input_ids"]
