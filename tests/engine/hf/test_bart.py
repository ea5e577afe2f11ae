"""BART (``BartForConditionalGeneration``) and mBART (``MBartForConditionalGeneration``) both ways: tiny random models
built from configs (no download, every tensor off its init, position tables too). Imported, the logits are HF's
within 1e-4 on every row; import → export → import is the identity; a folder numbered as BART's are published
(``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3, a tokenizer.json adding ``<s>`` … ``</s>``, the decoder starting
from ``</s>``) keeps its ids, and ``tbuild decode`` gives HF's greedy output on the tokenizer's own encoding; mBART-50's
language codes work as M2M100's (the source's at the start of a line, the target's as the target prefix)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tbuild.builder.spec import DecodeSpec
from tbuild.cli.app import app
from tbuild.engine.data.tokenizer import Tokenizer
from tbuild.engine.decoding.hf import hf_search
from tests.engine.hf.language_codes import assert_decodes_as_generate

from .test_import_hf import SEQ2SEQ, VOCAB, _assert_round_trip, _import, _loaded, _marian_tokenizer, _padded

transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install -e '.[export]')")
tokenizers = pytest.importorskip("tokenizers", reason="tokenizers not installed (pip install -e '.[export]')")

CLASSES = {"bart": ("BartConfig", "BartForConditionalGeneration"),
           "mbart": ("MBartConfig", "MBartForConditionalGeneration")}
VARIANTS = {
    "bart: post-norm, scaled, relu": ("bart", {}),
    "bart: unscaled, gelu (as published)": ("bart", {"scale_embedding": False, "activation_function": "gelu"}),
    "mbart: pre-norm, final norms, scaled": ("mbart", {}),
    "mbart: gelu, decoder one layer": ("mbart", {"activation_function": "gelu", "decoder_layers": 1}),
}
LINES = ["the cat sat on the mat", "a dog ran in the park", "le chat est sur le tapis", "un chien court"]
CODES = ["en_XX", "ro_RO"]


def bart_folder(family: str, overrides: dict, folder: Path):  # noqa: ANN201
    """A random BART or mBART model in ``folder``, every parameter (position tables too) moved off its init."""
    config_class, model_class = CLASSES[family]
    torch.manual_seed(0)
    hf = getattr(transformers, model_class)(getattr(transformers, config_class)(**(SEQ2SEQ | overrides)))
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.3)
        hf.final_logits_bias.zero_()
    hf.eval().save_pretrained(folder)
    return hf


@pytest.mark.parametrize(("family", "overrides"), VARIANTS.values(), ids=list(VARIANTS))
def test_bart_logits_match_hf_on_every_row(family: str, overrides: dict, spm: Tokenizer, tmp_path: Path) -> None:
    hf = bart_folder(family, overrides, tmp_path / "hf")
    _marian_tokenizer(spm, tmp_path / "hf")
    _import(tmp_path / "hf", tmp_path / "run")
    spec, model = _loaded(tmp_path / "run")
    assert spec.model.embedding_norm and spec.model.positional.kind == "learned"
    assert spec.model.norm_placement == ("pre" if family == "mbart" else "post")
    g = torch.Generator().manual_seed(1)
    src = _padded([torch.randint(4, VOCAB, (n,), generator=g).tolist() + [3] for n in (5, 9, 3)])
    tgt = _padded([[2] + torch.randint(4, VOCAB, (n,), generator=g).tolist() for n in (6, 4, 7)])
    with torch.no_grad():
        ours = model(src, tgt, src.eq(0))
        theirs = hf(input_ids=src, attention_mask=src.ne(0), decoder_input_ids=tgt).logits
    assert (ours - theirs)[tgt.ne(0)].abs().max().item() < 1e-4


@pytest.mark.parametrize("family", list(CLASSES))
def test_import_export_import_is_the_identity(family: str, spm: Tokenizer, tmp_path: Path) -> None:
    bart_folder(family, {}, tmp_path / "hf")
    _marian_tokenizer(spm, tmp_path / "hf")
    _import(tmp_path / "hf", tmp_path / "run")
    _assert_round_trip(tmp_path)
    config = json.loads((tmp_path / "again" / "config.json").read_text())
    assert config["architectures"] == [CLASSES[family][1]]


def _published(folder: Path, codes: list[str]):  # noqa: ANN202 - the tokenizers.Tokenizer
    """A tokenizer.json numbered as BART's (<s> 0, <pad> 1, </s> 2, <unk> 3) whose post-processor adds <s> … </s>
    (BART's RobertaProcessing), ``codes`` special tokens after the pieces (mBART-50's, with no post-processor)."""
    from tokenizers import decoders, models, pre_tokenizers, processors, trainers

    tk = tokenizers.Tokenizer(models.BPE(unk_token="<unk>"))
    tk.pre_tokenizer, tk.decoder = pre_tokenizers.Metaspace(), decoders.Metaspace()
    tk.train_from_iterator(LINES * 20, trainers.BpeTrainer(vocab_size=120, show_progress=False,
                                                           special_tokens=["<s>", "<pad>", "</s>", "<unk>"]))
    if codes:
        tk.add_special_tokens(codes)
        tk.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 2)])
    else:
        tk.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    folder.mkdir(parents=True, exist_ok=True)
    tk.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}))
    return tk


def _published_folder(family: str, codes: list[str], folder: Path):  # noqa: ANN202 - (the model, the tokenizer)
    tk = _published(folder, codes)
    ids = {"vocab_size": tk.get_vocab_size(), "bos_token_id": 0, "pad_token_id": 1, "eos_token_id": 2,
           "decoder_start_token_id": 2, "forced_eos_token_id": 2}
    return bart_folder(family, ids, folder), tk


def test_a_bart_folder_keeps_its_ids_and_decodes_as_hf_on_its_own_encoding(tmp_path: Path) -> None:
    hf, _ = _published_folder("bart", [], tmp_path / "hf")
    _import(tmp_path / "hf", tmp_path / "run")
    spec, _ = _loaded(tmp_path / "run")
    special = spec.special()
    assert (special.bos, special.pad, special.eos, special.unk) == (0, 1, 2, 3)
    assert special.source == ("bos", "text", "eos") and special.target == ("eos", "text", "eos")
    theirs_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    ours_tok = Tokenizer.load(tmp_path / "run" / "tokenizer.json", special)
    encoded = [theirs_tok(line).input_ids for line in LINES]
    assert [special.wrap(ids) for ids in ours_tok.encode(LINES)] == encoded  # the folder's ids, <s> … </s>
    result = CliRunner().invoke(app, ["decode", str(tmp_path / "run"), "--beam", "1", "--alpha", "0",
                                      "--device", "cpu"], input="\n".join(LINES) + "\n")
    assert result.exit_code == 0, result.output
    request = DecodeSpec(beam=1, alpha=0.0, max_len_a=1.0, max_len_b=50)  # the imported spec's length limit
    theirs = [ours_tok.decode(h[0].tokens) for h in hf_search(hf, encoded, request, None, special)]
    assert result.output.rstrip("\n").split("\n")[-len(LINES):] == theirs and any(theirs)


def test_mbart_50_language_codes_decode_as_hf_generate(tmp_path: Path) -> None:
    """mBART-50 reads [src code] X </s> and generates from </s> with the target's code forced first."""
    hf, tk = _published_folder("mbart", CODES, tmp_path / "hf")
    _import(tmp_path / "hf", tmp_path / "run")
    assert_decodes_as_generate(tmp_path / "run", hf, tk, CODES, 10)  # 10 count the code and the EOS forced at the limit


@pytest.mark.parametrize(("sets", "expected"), [
    (["model.norm={kind: layernorm, eps: 1.0e-6}"], "eps"),
    (["model.positional.kind=sinusoidal"], "model.positional sinusoidal"),
    (["model.tie_embeddings=decoder"], "model.tie_embeddings decoder"),
], ids=["eps", "positions", "tying"])
def test_what_bart_cannot_hold_is_refused_in_one_line(sets: list[str], expected: str) -> None:
    from tbuild.builder import load_spec
    from tbuild.engine.export.targets import CTRANSLATE2, HF, UnsupportedExport, check_exportable, hf_seq2seq_class
    from tests.conftest import TINY

    base = ["model.embedding_norm=true", "model.positional.kind=learned", "model.max_positions=64",
            "model.norm={kind: layernorm, eps: 1.0e-5}"]
    spec = load_spec(TINY, base).spec
    check_exportable(spec, HF)
    assert hf_seq2seq_class(spec) == "bart"
    assert hf_seq2seq_class(load_spec(TINY, [*base, "model.norm_placement=pre"]).spec) == "mbart"
    with pytest.raises(UnsupportedExport, match="embedding_norm"):
        check_exportable(spec, CTRANSLATE2)
    with pytest.raises(UnsupportedExport, match=expected):
        check_exportable(load_spec(TINY, base + sets).spec, HF)
