"""The encoder-decoder graph (§3.1) as built: forward/backward, weight sharing, incremental decoding,
beams sharing their sentence's memory."""

from __future__ import annotations

import pytest
import torch

from tbuild.components.transformer import DecoderCache

from ..conftest import tiny_model


def test_tiny_model_forward_backward() -> None:
    model = tiny_model().train()
    src, tgt = torch.randint(4, 40, (3, 7)), torch.randint(4, 40, (3, 5))
    logits = model(src, tgt)
    assert logits.shape == (3, 5, 40)
    logits.logsumexp(-1).mean().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None]
    assert not missing, missing


@pytest.mark.parametrize("tie,matrices", [("three_way", 1), ("decoder", 2), ("none", 3)])
def test_tied_weights_are_stored_once(tie: str, matrices: int) -> None:
    model = tiny_model([f"model.tie_embeddings={tie}"])
    vocab_matrices = {id(p) for p in model.parameters() if p.shape == (40, 16)}
    assert len(vocab_matrices) == matrices
    assert model.output.weight.data_ptr() == model.tgt_embed.tokens.weight.data_ptr() or tie == "none"


def test_embedding_scaled_by_sqrt_d_model() -> None:
    model = tiny_model(["model.positional.kind=none"])
    ids = torch.tensor([[5, 6]])
    expected = model.src_embed.tokens.weight[ids] * 16**0.5
    torch.testing.assert_close(model.src_embed(ids), expected)


@pytest.mark.parametrize("overrides", [[], ["model.norm_placement=pre"], ["model.positional.kind=learned",
                                                                          "model.max_positions=32"]])
def test_incremental_decoding_equals_full_pass(overrides: list[str]) -> None:
    model = tiny_model(overrides)
    src = torch.randint(4, 40, (2, 6))
    src[1, 4:] = 0  # padding
    tgt = torch.randint(4, 40, (2, 7))
    memory, pad = model.encode(src)
    full = model.decode(tgt, memory, pad)
    cache = DecoderCache()
    steps = [model.decode(tgt[:, t:t + 1], memory, pad, cache) for t in range(tgt.size(1))]
    assert (torch.cat(steps, 1) - full).abs().max() <= 1e-5
    # several positions at once after a cached prefix also agree
    cache = DecoderCache()
    first = model.decode(tgt[:, :3], memory, pad, cache)
    rest = model.decode(tgt[:, 3:], memory, pad, cache)
    assert (torch.cat([first, rest], 1) - full).abs().max() <= 1e-5


def test_cache_reorder_follows_rows() -> None:
    model = tiny_model()
    src = torch.randint(4, 40, (2, 5))
    tgt = torch.randint(4, 40, (2, 3))
    memory, pad = model.encode(src)
    cache = DecoderCache()
    model.decode(tgt[:, :2], memory, pad, cache)
    index = torch.tensor([1, 1, 0])
    cache.reorder(index, sources=index)
    step = model.decode(tgt[index, 2:], memory[index], pad[index], cache)
    full = model.decode(tgt[index], memory[index], pad[index])
    torch.testing.assert_close(step[:, 0], full[:, 2], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("cross", [[], ["model.cross_attention.kind=additive"],
                                   ["model.cross_attention.kind=multihead", "model.cross_attention.kv_heads=1"]])
def test_beams_share_their_sentence_memory(cross: list[str]) -> None:
    """Memory with one row per sentence serves that sentence's ``beams`` (consecutive target rows):
    the same logits as memory copied per beam; reorder without ``sources`` leaves cross K/V alone."""
    model = tiny_model(cross)
    src = torch.randint(4, 40, (2, 5))
    src[1, 3:] = 0  # padding
    beams = 3
    tgt = torch.randint(4, 40, (2 * beams, 3))
    memory, pad = model.encode(src)
    copied = memory.repeat_interleave(beams, 0), pad.repeat_interleave(beams, 0)
    torch.testing.assert_close(model.decode(tgt, memory, pad, beams=beams), model.decode(tgt, *copied),
                               atol=1e-5, rtol=1e-5)
    cache = DecoderCache()
    model.decode(tgt[:, :2], memory, pad, cache, beams=beams)
    cross_before = [layer["cross"]["k"] for layer in cache.layers]
    assert all(k.size(0) == 2 for k in cross_before)
    self_before = [layer["self"]["kv"].keys.clone() for layer in cache.layers]
    index = torch.tensor([2, 0, 0, 4, 4, 3])  # beams move within their sentence
    cache.reorder(index)
    assert all(layer["cross"]["k"] is k for layer, k in zip(cache.layers, cross_before, strict=True))
    assert all(torch.equal(layer["self"]["kv"].keys, k[index])
               for layer, k in zip(cache.layers, self_before, strict=True))
    step = model.decode(tgt[index, 2:], memory, pad, cache, beams=beams)
    full = model.decode(tgt[index], *copied)
    torch.testing.assert_close(step[:, 0], full[:, 2], atol=1e-5, rtol=1e-5)
    # the same moves while the second sentence leaves: its beams' rows and its memory row go
    cache = DecoderCache()
    model.decode(tgt[:, :2], memory, pad, cache, beams=beams)
    cache.reorder(index[:3], sources=torch.tensor([0]))
    step = model.decode(tgt[index[:3], 2:], memory[:1], pad[:1], cache, beams=beams)
    torch.testing.assert_close(step[:, 0], full[:3, 2], atol=1e-5, rtol=1e-5)
