"""Hugging Face export of encoder-decoders: post-norm to MarianMTModel, pre-norm to
PegasusForConditionalGeneration. Every mapped variant round-trips through save_pretrained / from_pretrained
(teacher-forced logits within 1e-4 in float32, greedy outputs identical, also through ``generate`` with
nothing but the saved generation config, and beam at α 0); Marian's sinusoid reordering and Pegasus's eps
rescaling are exact, Marian's eps rescaling exact but for each stack's first norm; the tokenizer files give
tbuild's ids; everything else is refused in one line naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tbuild.builder import build_model, load_spec
from tbuild.builder.spec import DecodeSpec
from tbuild.components.positional import sinusoid_table
from tbuild.components.specs.special import BOS, DEFAULT, EOS, PAD
from tbuild.engine.decoding.hf import hf_search
from tbuild.engine.decoding.search import greedy_search
from tbuild.engine.export.targets import HF, UnsupportedExport, check_exportable, hf_seq2seq_class
from tbuild.engine.hf.marian import feature_order as marian_order
from tbuild.engine.hf.writer import to_hf, write_hf
from tests.conftest import TINY

transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install -e '.[export]')")

EPS = "model.norm={kind: layernorm, eps: 1.0e-5}"  # MarianMTModel's fixed LayerNorm eps
EPS6 = "model.norm={kind: layernorm, eps: 1.0e-6}"  # tbuild's default: Marian's stream rescaled (export/hf.py)
VARIANTS = {
    "post-norm relu (paper)": [],
    "gelu": ["model.ffn={kind: gelu}"],
    "silu (Marian's swish)": ["model.ffn={kind: silu}"],
    "gelu_tanh (gelu_new)": ["model.ffn={kind: gelu_tanh}"],
    "decoder-tied": ["model.tie_embeddings=decoder"],
    "untied, own source vocabulary": ["model.tie_embeddings=none", "model.src_vocab_size=30"],
    "no attention biases": ["model.attention={kind: multihead, bias: false}",
                            "model.cross_attention={kind: multihead, bias: false}"],
    "unscaled embeddings": ["model.scale_embeddings=false"],
    "stacks differ (heads, d_ff, layers)": ["model.decoder.heads=2", "model.decoder.d_ff=24", "model.decoder.layers=1"],
    "max_positions": ["model.max_positions=32"],
    "eps 1e-6 (tbuild's default: the stream rescaled by √10 from the first norm on)": [EPS6],
    "decoder eps 1e-6, encoder 1e-5": ["model.decoder.norm={kind: layernorm, eps: 1.0e-6}"],
    "eps 1e-6, one-layer stacks, decoder-tied": [EPS6, "model.encoder.layers=1", "model.decoder.layers=1",
                                                 "model.tie_embeddings=decoder"],
    "eps 1e-6, untied": [EPS6, "model.tie_embeddings=none", "model.src_vocab_size=30"],
}
PRE = "model.norm_placement=pre"  # PegasusForConditionalGeneration, at tbuild's default eps 1e-6 unless set
PEGASUS_VARIANTS = {
    "pre-norm relu, eps 1e-6 (the stream rescaled by √10)": [PRE],
    "eps 1e-5 (nothing rescaled)": [PRE, EPS],
    "eps 1e-2 (rescaled by √1e-3)": [PRE, "model.norm={kind: layernorm, eps: 1.0e-2}"],
    "gelu": [PRE, "model.ffn={kind: gelu}"],
    "learned positions": [PRE, "model.positional={kind: learned}", "model.max_positions=32"],
    "no positions": [PRE, "model.positional={kind: none}"],
    "no attention biases": [PRE, "model.attention={kind: multihead, bias: false}",
                            "model.cross_attention={kind: multihead, bias: false}"],
    "unscaled embeddings": [PRE, "model.scale_embeddings=false"],
    "stacks differ (heads, d_ff, layers)": [PRE, "model.decoder.heads=2", "model.decoder.d_ff=24",
                                            "model.decoder.layers=1"],
    "max_positions": [PRE, "model.max_positions=32"],
}


def _export(overrides: list[str], tmp_path: Path):  # noqa: ANN202
    """The spec (a post-norm one at Marian's eps), the model, and its export reloaded by the class its
    config.json names."""
    spec = load_spec(TINY, ([] if PRE in overrides else [EPS]) + overrides).spec
    model = build_model(spec).eval()
    to_hf(model, spec, hf_seq2seq_class(spec)).save_pretrained(tmp_path / "hf")
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "hf").eval()
    return spec, model, hf


def _padded(rows: list[list[int]]) -> torch.Tensor:
    width = max(map(len, rows))
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows])


@pytest.mark.parametrize("overrides", [*VARIANTS.values(), *PEGASUS_VARIANTS.values()],
                         ids=[*VARIANTS, *(f"pegasus: {k}" for k in PEGASUS_VARIANTS)])
def test_round_trip(overrides: list[str], tmp_path: Path) -> None:
    spec, model, hf = _export(overrides, tmp_path)
    expected_class = "MarianMTModel" if PRE not in overrides else "PegasusForConditionalGeneration"
    assert type(hf).__name__ == expected_class
    g = torch.Generator().manual_seed(1)
    srcs = [torch.randint(4, spec.src_vocab_size(), (n,), generator=g).tolist() + [EOS] for n in (5, 9, 3)]
    tgts = [[BOS] + torch.randint(4, 40, (n,), generator=g).tolist() for n in (6, 4, 7)]
    src, tgt = _padded(srcs), _padded(tgts)  # a padded batch: the source mask matters
    with torch.no_grad():
        ours = model(src, tgt, src.eq(PAD))  # the padding, as the rows' lengths tell it
        theirs = hf(input_ids=src, attention_mask=src.ne(PAD), decoder_input_ids=tgt).logits
    real = tgt.ne(PAD)
    assert (ours - theirs)[real].abs().max().item() < 1e-4
    greedy = DecodeSpec(beam=1, alpha=0.6, max_len_a=1.0, max_len_b=5)
    for s, h in zip(srcs, hf_search(hf, srcs, greedy, spec.model.max_positions, DEFAULT), strict=True):
        expected = greedy_search(model, torch.tensor([s]), max_len_a=1.0, max_len_b=5)[0]
        assert h[0].tokens == expected
        # The saved config alone decodes as tbuild: starts from BOS, bans PAD/BOS, forces EOS at the limit.
        plain = hf.generate(input_ids=torch.tensor([s]), num_beams=1, max_length=len(s) + 5 + 1)[0].tolist()
        assert plain == [BOS, *expected, EOS]


def test_greedy_log_probs_match() -> None:
    """hf_search's greedy scores are the model's log-probs, as tbuild's (not HF's processed scores)."""
    spec = load_spec(TINY, [EPS]).spec
    model = build_model(spec).eval()
    hf = to_hf(model, spec, "marian")
    src = [5, 6, 7, 8, EOS]
    h = hf_search(hf, [src], DecodeSpec(beam=1, alpha=0.0, max_len_a=0.0, max_len_b=4), None, DEFAULT)[0][0]
    with torch.no_grad():
        logp = model(torch.tensor([src]), torch.tensor([[BOS] + h.tokens]))[0].log_softmax(-1)
    expected = logp.gather(-1, torch.tensor(h.tokens + [EOS])[:, None]).sum().item()
    assert h.log_prob == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("eps", [EPS, EPS6], ids=["eps 1e-5", "eps 1e-6 (rescaled)"])
def test_beam_at_alpha_0_matches_tbuild(eps: str) -> None:
    """With α = 0 both searches rank by log P alone and stop when no live beam can win, and a row at its
    own limit (a batch of different limits) scores EOS with the model's log p: the same hypotheses."""
    from tbuild.engine.decoding.search import beam_search

    spec = load_spec(TINY, [eps]).spec
    model = build_model(spec).eval()
    hf = to_hf(model, spec, "marian")
    g = torch.Generator().manual_seed(3)
    srcs = [torch.randint(4, 40, (n,), generator=g).tolist() + [EOS] for n in (4, 8, 2, 6)]
    decode = DecodeSpec(beam=3, alpha=0.0, max_len_a=0.5, max_len_b=3)
    for s, h in zip(srcs, hf_search(hf, srcs, decode, None, DEFAULT), strict=True):
        ours = beam_search(model, torch.tensor([s]), beam=3, alpha=0.0, max_len_a=0.5, max_len_b=3)[0][0]
        assert h[0].tokens == ours.tokens
        assert h[0].score == pytest.approx(ours.score, abs=1e-4)


def test_marian_sinusoid_is_tbuild_table_reordered(tmp_path: Path) -> None:
    """Marian rebuilds its table on load (sin half | cos half); tbuild interleaves (§3.5). Column j of
    Marian's row p is column order[j] of tbuild's row p, at every position from 0, so reordering the
    model dimension by ``marian_order`` makes the two embeddings the same vectors."""
    spec, model, hf = _export(["model.max_positions=64"], tmp_path)
    order = marian_order(spec.model.d_model)
    assert sorted(order.tolist()) == list(range(spec.model.d_model))
    ours = sinusoid_table(64, spec.model.d_model)
    for table in (hf.model.encoder.embed_positions.weight, hf.model.decoder.embed_positions.weight):
        assert table.shape == ours.shape
        assert torch.allclose(table, ours[:, order], atol=1e-6, rtol=0)
        assert torch.allclose(table[:, torch.argsort(order)], ours, atol=1e-6, rtol=0)
    ids = torch.tensor([[7, 9, 11, EOS]])
    with torch.no_grad():
        theirs = hf.model.encoder.embed_tokens(ids) * hf.model.encoder.embed_scale
        theirs = theirs + hf.model.encoder.embed_positions(ids.shape)
        assert torch.allclose(theirs, model.src_embed(ids)[..., order], atol=1e-5, rtol=0)


def test_marian_rescaling_is_exact_but_for_each_stack_first_norm() -> None:
    """At eps 1e-6 the export scales each stack's stream by √10 from its first LayerNorm on (export/hf.py):
    the stacks' input, output and token tables keep tbuild's scale, and with each stack's first LayerNorm
    given tbuild's eps the MarianMTModel computes tbuild's logits to float32 rounding."""
    spec = load_spec(TINY, [EPS6]).spec
    model = build_model(spec).eval()
    hf = to_hf(model, spec, "marian")
    c = 10 ** 0.5
    ln = hf.model.encoder.layers[0].self_attn_layer_norm
    assert ln.eps == 1e-5 and torch.allclose(ln.weight, model.encoder[0].self_attn.norm.weight[marian_order(16)] * c)
    assert torch.equal(hf.model.decoder.embed_tokens.weight, model.tgt_embed.tokens.weight[:, marian_order(16)])
    src, tgt = torch.tensor([[5, 9, 12, 7, EOS]]), torch.tensor([[BOS, 8, 6, 11]])
    with torch.no_grad():
        ours = model(src, tgt)
        approximate = (ours - hf(input_ids=src, decoder_input_ids=tgt).logits).abs().max().item()
        for stack in (hf.model.encoder, hf.model.decoder):
            stack.layers[0].self_attn_layer_norm.eps = 1e-6
        exact = (ours - hf(input_ids=src, decoder_input_ids=tgt).logits).abs().max().item()
    assert exact < 2e-6 and approximate < 1e-4


def test_tokenizer_files_give_tbuild_ids(tiny_corpus: Path, tmp_path: Path) -> None:
    from tbuild.builder.spec import TokenizerSpec
    from tbuild.engine.data.tokenizer import Tokenizer

    lines = (tiny_corpus / "train.en").read_text().splitlines() + (tiny_corpus / "train.de").read_text().splitlines()
    tok = Tokenizer.train(lines, TokenizerSpec(vocab_size=200), tmp_path / "spm")
    out = tmp_path / "hf"
    spec = load_spec(TINY, [EPS, "model.vocab_size=240"]).spec  # 40 embedding rows past the tokenizer's pieces
    write_hf(build_model(spec).eval(), spec, "marian", tok, out)
    vocab = json.loads((out / "vocab.json").read_text())
    assert len(vocab) == 240 and vocab[tok.sp.id_to_piece(57)] == 57 and vocab["<tbuild_unused_239>"] == 239
    marian = transformers.MarianTokenizer.from_pretrained(str(out))
    sentences = ["A man is riding a bike.", "Zwei Hunde spielen im Schnee, während ein Kind zusieht."]
    for sentence, ids in zip(sentences, tok.encode(sentences), strict=True):
        encoded = marian(sentence)["input_ids"]
        assert encoded == ids + [EOS]  # tbuild's source: pieces then EOS, no BOS
        assert marian.decode([BOS, *ids, EOS], skip_special_tokens=True) == tok.decode(ids)


def test_pegasus_holds_tbuild_positions_and_a_rescaled_stream(tmp_path: Path) -> None:
    """Pegasus stores its position table: tbuild's sinusoid (§3.5, interleaved, no reordering) is written in
    it, times c = √(1e-5/ε) as the token table; its LayerNorms keep eps 1e-5 (no config field holds another)."""
    spec, model, hf = _export([PRE, "model.max_positions=64"], tmp_path)  # ε = 1e-6: c = √10
    c = 10 ** 0.5
    assert hf.model.encoder.layer_norm.eps == 1e-5 and hf.config.max_position_embeddings == 64
    for table in (hf.model.encoder.embed_positions.weight, hf.model.decoder.embed_positions.weight):
        assert torch.allclose(table, sinusoid_table(64, spec.model.d_model) * c, atol=1e-6, rtol=0)
    assert torch.allclose(hf.model.shared.weight, model.src_embed.tokens.weight * c, atol=1e-6, rtol=0)
    assert hf.lm_head.weight.data_ptr() == hf.model.shared.weight.data_ptr()  # tied, as tbuild's three_way
    assert torch.allclose(hf.model.decoder.layer_norm.weight, model.decoder_norm.weight / c, atol=1e-6, rtol=0)
    assert torch.allclose(hf.model.encoder.layer_norm.weight, model.encoder_norm.weight)  # the memory as tbuild's


def test_class_follows_norm_placement() -> None:
    assert hf_seq2seq_class(load_spec(TINY, [EPS]).spec) == "marian"
    assert hf_seq2seq_class(load_spec(TINY, [PRE]).spec) == "pegasus"


REFUSED = {
    "local": (["model.attention={kind: local}"], "attention"),
    "additive": (["model.attention={kind: additive}"], "attention"),
    "relative": (["model.attention={kind: relative}"], "attention"),
    "rope": (["model.positional={kind: rope}"], "positional"),
    "alibi": (["model.positional={kind: alibi}"], "positional"),
}
ONLY_T5 = {  # kinds hf takes for T5ForConditionalGeneration only: refused for the BART-family classes
    "swiglu": (["model.ffn={kind: swiglu}"], "ffn"),
    "rmsnorm": (["model.norm={kind: rmsnorm, eps: 1.0e-5}"], "norm"),
}


@pytest.mark.parametrize("kind", REFUSED)
def test_refused_kinds_name_kind_and_what_is_supported(kind: str) -> None:
    overrides, registry = REFUSED[kind]
    for placement in ("post", "pre"):
        spec = load_spec(TINY, [EPS, f"model.norm_placement={placement}", *overrides]).spec
        build_model(spec)  # a model tbuild can build and train...
        with pytest.raises(UnsupportedExport, match=rf"{registry} kind '{kind}'.*hf supports {registry}:") as e:
            check_exportable(spec, HF)  # ...that the export refuses rather than mis-exports
        assert len(str(e.value).splitlines()) == 1


@pytest.mark.parametrize("kind", ONLY_T5)
def test_kinds_only_t5_holds_are_refused_for_marian_and_pegasus(kind: str) -> None:
    overrides, registry = ONLY_T5[kind]
    for placement in ("post", "pre"):
        spec = load_spec(TINY, [EPS, f"model.norm_placement={placement}", *overrides]).spec
        with pytest.raises(UnsupportedExport, match=rf"{registry} kind '{kind}' \(the BART-family classes") as e:
            check_exportable(spec, HF)
        assert len(str(e.value).splitlines()) == 1


@pytest.mark.parametrize("overrides, what", [
    ([EPS, "model.positional={kind: learned}", "model.max_positions=32"], "model.positional learned"),
    ([EPS, "model.positional={kind: none}"], "model.positional none"),
    (["model.encoder.layers=null",
      "model.encoder.groups=[{repeat: 1}, {repeat: 1, norm: {kind: layernorm, eps: 1.0e-5}}]"],
     r"encoder layer groups differ in norm eps \(1e-06, 1e-05;"),
    (["model.norm={kind: layernorm, eps: 1.0e-3}"], r"model\.encoder norm eps 0\.001 \(above MarianMTModel's 1e-05"),
    ([EPS, "model.final_norm=true"], "final norm"),
    ([EPS, "model.attention={kind: multihead, kv_heads: 2}", "model.cross_attention={kind: multihead, kv_heads: 2}"],
     "kv_heads 2"),
    ([EPS, "model.encoder.d_k=8", "model.encoder.d_v=8"], r"d_k \(8\) · heads \(4\) differs from d_model \(16\)"),
    ([EPS, "model.decoder.ffn={kind: gelu}"], "FFN kinds differ"),
    ([PRE, "model.tie_embeddings=decoder"], "model.tie_embeddings decoder .PegasusForConditionalGeneration shares"),
    ([PRE, "model.tie_embeddings=none", "model.src_vocab_size=30"], "model.tie_embeddings none"),
    ([PRE, "model.final_norm=false"], "model.final_norm false .encoder; PegasusForConditionalGeneration"),
    ([PRE, "model.decoder.norm={kind: layernorm, eps: 1.0e-5}"],
     r"norms differ in eps \(model\.norm\.eps 1e-06, model\.decoder\.norm\.eps 1e-05;"),
])
def test_refused_structures(overrides: list[str], what: str) -> None:
    with pytest.raises(UnsupportedExport, match=rf"^cannot export to hf: .*{what}.*; hf needs post-norm") as e:
        check_exportable(load_spec(TINY, overrides).spec, HF)
    assert len(str(e.value).splitlines()) == 1


def test_newly_registered_kind_is_refused(dummy_attention: None) -> None:
    spec = load_spec(TINY, [EPS, "model.attention={kind: dummy_export_test}"]).spec
    build_model(spec)
    with pytest.raises(UnsupportedExport, match="attention kind 'dummy_export_test'.*hf supports attention: multihead"):
        check_exportable(spec, HF)


def test_transformers_is_imported_lazily() -> None:
    """Importing tbuild (the CLI, the export and decoding modules) never imports transformers."""
    import subprocess
    import sys

    code = ("import sys, tbuild.cli.app, tbuild.engine.hf.writer, tbuild.engine.hf.importer, "
            "tbuild.engine.export.parity, "
            "tbuild.engine.decoding.hf, tbuild.engine.decoding.engines; "
            "assert 'transformers' not in sys.modules, 'transformers imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
