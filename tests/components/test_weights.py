"""The encoder-decoder's weight tree (components/weights.py): its parts, the user's layer names, and export
maps that name every weight the model has."""

from __future__ import annotations

import pytest
from torch import nn

from tbuild.components.transformer import ENCODER_DECODER, EncoderDecoder
from tbuild.components.weights import weight_tree

from ..conftest import tiny_model


def test_the_encoder_decoder_declares_its_tree() -> None:
    assert weight_tree(tiny_model()) is EncoderDecoder.WEIGHTS is ENCODER_DECODER
    with pytest.raises(TypeError, match="Linear declares no WEIGHTS"):
        weight_tree(nn.Linear(2, 2))


def test_parts_and_user_names() -> None:
    tree = ENCODER_DECODER
    assert tree.fixed_parts() == {
        "embeddings": ("src_embed.", "tgt_embed.", "output."), "encoder": ("encoder.", "encoder_norm."),
        "decoder": ("decoder.", "decoder_norm."), "encoder.norm": ("encoder_norm.",),
        "decoder.norm": ("decoder_norm.",)}
    assert tree.part_names()[-4:] == ["encoder.layers.I", "encoder.layers.I-J", "decoder.layers.I",
                                      "decoder.layers.I-J"]
    stack, first, last = tree.layer_range("decoder.layers.2-4")
    assert (stack.layers, first, last) == ("decoder", 2, 4)
    assert tree.layer_range("decoder.layers") is None and tree.layer_range("output") is None
    assert tree.internal("decoder.layers.6.") == "decoder.6"
    assert tree.internal("decoder.layers.6.ffn") == "decoder.6.ffn"
    assert tree.internal("output") == "output"
    assert tree.block("encoder.1.ffn.norm.weight") == "encoder.layers.1"
    assert [tree.block(n) for n in ("src_embed.tokens.weight", "decoder_norm.bias")] == ["src_embed", "decoder_norm"]


@pytest.mark.parametrize("tie", ["three_way", "none"])
def test_every_parameter_is_in_one_stack_or_the_embeddings(tie: str) -> None:
    model = tiny_model([f"model.tie_embeddings={tie}"])
    parts = ENCODER_DECODER.fixed_parts()
    for name, _ in model.named_parameters(remove_duplicate=False):
        owners = [p for p in ("embeddings", "encoder", "decoder") if name.startswith(parts[p])]
        assert len(owners) == 1, name
    vocab = {n for n, p in model.named_parameters(remove_duplicate=False) if p.size(0) == 40}
    assert vocab <= ENCODER_DECODER.vocab_rows


def test_the_ctranslate2_map_names_every_weight() -> None:
    """Every parameter goes somewhere (sinusoidal positions have none); every source exists but the optional
    ones (SwiGLU's V, the final norms of a pre-norm model). (Hugging Face's maps: tests/engine/hf/test_maps.py.)"""
    model = tiny_model(["model.tie_embeddings=none", "model.src_vocab_size=30"])
    names = ENCODER_DECODER.export_names("ctranslate2", model)
    params = dict(model.named_parameters(remove_duplicate=False))
    used = {s for sources in names.values() for s in sources}
    assert set(params) - used == set()
    optional = {s for s in used if ".v." in s or s.startswith(("encoder_norm.", "decoder_norm."))}
    assert used - set(params) <= optional
    layers = ENCODER_DECODER.layer_counts(model)
    assert layers == {"encoder": len(model.encoder), "decoder": len(model.decoder)}
    last = layers["decoder"] - 1
    assert names[f"decoder/layer_{last}/attention/linear_1/weight"] == (
        f"decoder.{last}.cross_attn.sublayer.w_k.weight", f"decoder.{last}.cross_attn.sublayer.w_v.weight")
    assert f"decoder/layer_{last + 1}/ffn/linear_1/weight" not in names
