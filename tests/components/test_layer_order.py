"""model.<stack>.order: each preset's layer computes what it says, recomputed by hand from the layer's own
blocks; the paper's order builds the layers (classes, parameter names) it always did; incremental decoding
equals the full pass for every order, in the encoder-decoder and in the decoder-only graph."""

from __future__ import annotations

import copy

import pytest
import torch

from tbuild.components.decoder_only import CausalLayer
from tbuild.components.ordered_layer import OrderedCausalLayer, OrderedDecoderLayer, OrderedEncoderLayer
from tbuild.components.transformer import DecoderCache, DecoderLayer, EncoderLayer, padding_mask

from ..conftest import TINY, tiny_model

ONE = copy.deepcopy(TINY)
ONE["model"]["encoder"]["layers"] = ONE["model"]["decoder"]["layers"] = 1
LM = copy.deepcopy(TINY)
LM["model"].pop("encoder")
LM["model"]["kind"] = "decoder_only"


def orders(encoder: str | None, decoder: str | None, pre: bool = False, spec: dict = ONE):  # noqa: ANN201
    """A model of ``spec`` with these orders (None: the default), post- or pre-norm."""
    sets = [f"model.{stack}.order={o}" for stack, o in (("encoder", encoder), ("decoder", decoder)) if o is not None]
    return tiny_model(sets + (["model.norm_placement=pre"] if pre else []), spec)


def self_attn(block, x, causal: bool, positional) -> torch.Tensor:  # noqa: ANN001
    """A self-attention sub-layer as the layer calls it (the decoder's causally, with positions)."""
    return block(x, positional=positional) if not causal else block(x, positional=positional, offset=0)


def test_the_paper_order_keeps_its_layers_and_names() -> None:
    """The default, ``standard`` and the letters af/acf all build the paper's layer classes, with the
    parameter names every checkpoint has, and the same weights and outputs from the same seed."""
    src, tgt = torch.randint(4, 40, (2, 6)), torch.randint(4, 40, (2, 5))
    outputs, names = [], []
    for encoder, decoder in ((None, None), ("standard", "standard"), ("af", "acf")):
        torch.manual_seed(0)
        model = orders(encoder, decoder)
        assert type(model.encoder[0]) is EncoderLayer and type(model.decoder[0]) is DecoderLayer
        outputs.append(model(src, tgt))
        names.append(list(model.state_dict()))
    assert names[0] == names[1] == names[2]
    assert torch.equal(outputs[0], outputs[1]) and torch.equal(outputs[0], outputs[2])
    layer = [n.removeprefix("decoder.0.") for n in names[0] if n.startswith("decoder.0.")]
    attention = [f"sublayer.{w}.{p}" for w in ("w_q", "w_k", "w_v", "w_o") for p in ("weight", "bias")]
    norm = ["norm.weight", "norm.bias"]
    assert layer == ([f"self_attn.{n}" for n in attention + norm] + [f"cross_attn.{n}" for n in attention + norm]
                     + [f"ffn.{n}" for n in ("sublayer.w1.weight", "sublayer.w1.bias", "sublayer.w2.weight",
                                             "sublayer.w2.bias", *norm)])
    assert type(tiny_model(spec=LM).decoder[0]) is CausalLayer


@pytest.mark.parametrize("pre", [False, True])
def test_macaron_is_two_half_step_ffns_around_the_attention(pre: bool) -> None:
    """Encoder ``faf``: x + ½·FFN, self-attention, x + ½·FFN, each block in its residual connection
    (post-norm: Norm(x + ½·FFN(x)); pre-norm: x + ½·FFN(Norm(x)))."""
    model = orders("macaron", "macaron", pre)
    layer = model.encoder[0]
    assert type(layer) is OrderedEncoderLayer and [n for _, n in layer.order] == ["ffn", "self_attn", "ffn_2"]
    x, positional = torch.randn(2, 5, 16), model.src_embed.positional

    def step(block, x: torch.Tensor, scale: float, run) -> torch.Tensor:  # noqa: ANN001
        return x + scale * run(block.sublayer, block.norm(x)) if pre else block.norm(x + scale * run(block.sublayer, x))

    h = step(layer.ffn, x, 0.5, lambda f, y: f(y))
    h = step(layer.self_attn, h, 1.0, lambda f, y: self_attn(f, y, False, positional))
    expected = step(layer.ffn_2, h, 0.5, lambda f, y: f(y))
    torch.testing.assert_close(layer(x, None, positional), expected, atol=1e-6, rtol=1e-6)
    decoder = model.decoder[0]
    assert type(decoder) is OrderedDecoderLayer and decoder.order == (
        ("f", "ffn"), ("a", "self_attn"), ("c", "cross_attn"), ("f", "ffn_2"))
    assert decoder.ffn.scale == decoder.ffn_2.scale == 0.5 and decoder.self_attn.scale == 1.0


def test_sandwich_and_letters_run_their_blocks_in_order() -> None:
    """sandwich (encoder aaff, decoder aacff) and the letters acaf: each block in turn, post-norm."""
    model = orders("sandwich", "acaf")
    enc, positional = model.encoder[0], model.src_embed.positional
    assert [n for _, n in enc.order] == ["self_attn", "self_attn_2", "ffn", "ffn_2"]
    x = torch.randn(2, 5, 16)
    h = x
    for block in (enc.self_attn, enc.self_attn_2):
        h = block.norm(h + self_attn(block.sublayer, h, False, positional))
    for block in (enc.ffn, enc.ffn_2):
        h = block.norm(h + block.sublayer(h))
    torch.testing.assert_close(enc(x, None, positional), h, atol=1e-6, rtol=1e-6)
    dec, memory = model.decoder[0], torch.randn(2, 4, 16)
    assert [n for _, n in dec.order] == ["self_attn", "cross_attn", "self_attn_2", "ffn"]
    h = dec.self_attn.norm(x + self_attn(dec.self_attn.sublayer, x, True, positional))
    h = dec.cross_attn.norm(h + dec.cross_attn.sublayer(h, memory))
    h = dec.self_attn_2.norm(h + self_attn(dec.self_attn_2.sublayer, h, True, positional))
    h = dec.ffn.norm(h + dec.ffn.sublayer(h))
    torch.testing.assert_close(dec(x, memory, None, positional, None, 0), h, atol=1e-6, rtol=1e-6)
    assert orders(None, "sandwich").decoder[0].order == (
        ("a", "self_attn"), ("a", "self_attn_2"), ("c", "cross_attn"), ("f", "ffn"), ("f", "ffn_2"))


def test_parallel_adds_attention_and_ffn_of_one_normed_input() -> None:
    """parallel (GPT-J, PaLM): x + Attn(Norm(x)) + FFN(Norm(x)) with one norm (the layer's); in an
    encoder-decoder's decoder the cross-attention reads the same Norm(x) and is added too."""
    model = orders("parallel", "parallel", pre=True)
    enc, positional = model.encoder[0], model.src_embed.positional
    assert isinstance(enc.self_attn.norm, torch.nn.Identity) and isinstance(enc.ffn.norm, torch.nn.Identity)
    x = torch.randn(2, 5, 16)
    n = enc.norm(x)
    expected = x + self_attn(enc.self_attn.sublayer, n, False, positional) + enc.ffn.sublayer(n)
    torch.testing.assert_close(enc(x, None, positional), expected, atol=1e-6, rtol=1e-6)
    dec, memory = model.decoder[0], torch.randn(2, 4, 16)
    n = dec.norm(x)
    expected = (x + self_attn(dec.self_attn.sublayer, n, True, positional) + dec.cross_attn.sublayer(n, memory)
                + dec.ffn.sublayer(n))
    torch.testing.assert_close(dec(x, memory, None, positional, None, 0), expected, atol=1e-6, rtol=1e-6)
    lm = orders(None, "parallel", pre=True, spec=LM)
    assert type(lm.decoder[0]) is OrderedCausalLayer
    assert [k.removeprefix("decoder.0.") for k in lm.state_dict() if k.startswith("decoder.0.") and "norm" in k] \
        == ["norm.weight", "norm.bias"]  # one norm per layer


ORDERS = [("macaron", False), ("macaron", True), ("parallel", True), ("sandwich", False), ("acaf", True),
          ("acacf", False)]


@pytest.mark.parametrize(("order", "pre"), ORDERS)
def test_incremental_decoding_equals_the_full_pass(order: str, pre: bool) -> None:
    """The encoder-decoder's decoder one position at a time (each self-attention's cache, each
    cross-attention's keys once) gives the full pass's logits, also after a beam-search reorder."""
    torch.manual_seed(0)
    model = orders(None if "c" in order else order, order, pre, spec=TINY)
    src, tgt = torch.randint(4, 40, (2, 6)), torch.randint(4, 40, (2, 7))
    src[1, 4:] = 0  # padding
    memory, pad = model.encode(src)
    full = model.decode(tgt, memory, pad)
    cache = DecoderCache()
    steps = [model.decode(tgt[:, t:t + 1], memory, pad, cache) for t in range(tgt.size(1))]
    assert (torch.cat(steps, 1) - full).abs().max() <= 1e-5
    attentions = [name for letter, name in model.decoder[0].order if letter != "f"]  # each its own cache entry
    assert sorted(cache.layers[0]) == sorted(n.replace("_attn", "") for n in attentions)
    cache = DecoderCache()
    model.decode(tgt[:, :3], memory, pad, cache)
    index = torch.tensor([1, 1, 0])
    cache.reorder(index, sources=index)
    step = model.decode(tgt[index, 3:4], memory[index], pad[index], cache)
    torch.testing.assert_close(step[:, 0], model.decode(tgt[index], memory[index], pad[index])[:, 3],
                               atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("order", "pre"), [("macaron", False), ("parallel", True), ("aafaf", True)])
def test_a_language_model_decodes_incrementally_in_every_order(order: str, pre: bool) -> None:
    model = orders(None, order, pre, spec=LM)
    tgt = torch.randint(4, 40, (3, 8))
    full = model.decode(tgt)
    cache = DecoderCache()
    steps = [model.decode(tgt[:, t:t + 1], cache) for t in range(tgt.size(1))]
    assert (torch.cat(steps, 1) - full).abs().max() <= 1e-5
    changed = tgt.clone()
    changed[:, 5] = (changed[:, 5] - 4 + 1) % 36 + 4  # a later token never changes an earlier logit
    assert (model.decode(changed)[:, :5] - full[:, :5]).abs().max() <= 1e-5


TAGGER = {"model": {"kind": "encoder_only", "vocab_size": 40, "d_model": 16, "norm_placement": "pre",
                    "encoder": {"layers": 2, "heads": 4, "d_ff": 32, "order": "parallel"},
                    "head": {"kind": "token_classification", "labels": ["DT", "NN", "VB"]}},
          "data": {"dataset": {"kind": "tagging", "source": "files"}, "train": "t", "valid": "v"}}


@pytest.mark.parametrize(("order", "pre"), [("macaron", False), ("sandwich", True), ("parallel", True)])
def test_an_ordered_encoder_leaves_real_positions_alone_by_padding(order: str, pre: bool) -> None:
    """Each self-attention of an ordered encoder layer gets the padding mask: a padded row's real positions
    are encoded as the row alone, in the encoder-decoder and in the encoder-only tagger."""
    src = torch.tensor([[5, 6, 7, 8, 9], [5, 6, 7, 0, 0]])
    pad = padding_mask(torch.tensor([5, 3]), 5)
    model = orders(order, None, pre, spec=TINY)
    memory, _ = model.encode(src, pad)
    alone, _ = model.encode(src[1:, :3])
    torch.testing.assert_close(memory[1:, :3], alone, atol=1e-5, rtol=1e-5)
    tagger = tiny_model([f"model.encoder.order={order}", f"model.norm_placement={'pre' if pre else 'post'}"],
                        TAGGER)
    assert type(tagger.encoder[0]) is OrderedEncoderLayer
    torch.testing.assert_close(tagger(src, None, pad)[1:, :3], tagger(src[1:, :3]), atol=1e-5, rtol=1e-5)
