"""The built encoder-decoder: forward/backward, weight sharing, incremental decoding."""

from __future__ import annotations

import pytest
import torch

from tbuild.components.transformer import DecoderCache

from .conftest import tiny_model


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
    cache.reorder(index)
    step = model.decode(tgt[index, 2:], memory[index], pad[index], cache)
    full = model.decode(tgt[index], memory[index], pad[index])
    torch.testing.assert_close(step[:, 0], full[:, 2], atol=1e-5, rtol=1e-5)


def test_cache_reorder_without_cross_keeps_cross_state() -> None:
    """Beams of one sentence share its cross-attention K/V: cross=False reorders only self-attention."""
    model = tiny_model()
    src = torch.randint(4, 40, (1, 5)).expand(3, 5)  # three beams of one sentence
    tgt = torch.randint(4, 40, (3, 3))
    memory, pad = model.encode(src)
    cache = DecoderCache()
    model.decode(tgt[:, :2], memory, pad, cache)
    cross_before = [layer["cross"]["k"] for layer in cache.layers]
    self_before = [layer["self"]["k"] for layer in cache.layers]
    index = torch.tensor([2, 0, 0])
    cache.reorder(index, cross=False)
    assert all(layer["cross"]["k"] is k for layer, k in zip(cache.layers, cross_before, strict=True))
    assert all(torch.equal(layer["self"]["k"], k[index]) for layer, k in zip(cache.layers, self_before, strict=True))
    step = model.decode(tgt[index, 2:], memory, pad, cache)
    full = model.decode(tgt[index], memory, pad)
    torch.testing.assert_close(step[:, 0], full[:, 2], atol=1e-5, rtol=1e-5)

