"""The decoder-only graph (a causal language model) as built: no position sees a later one, the
incremental step with its cache equals the full pass, the attention and positional kinds it reuses."""

from __future__ import annotations

import copy

import pytest
import torch

from tbuild.components.decoder_only import DecoderOnly
from tbuild.components.transformer import DecoderCache

from ..conftest import TINY, tiny_model

LM = copy.deepcopy(TINY)
LM["model"].pop("encoder")
LM["model"]["kind"] = "decoder_only"

VARIANTS = [
    [],
    ["model.norm_placement=pre"],
    ["model.positional.kind=learned", "model.max_positions=32"],
    ["model.positional.kind=rope"],
    ["model.positional.kind=alibi"],
    ["model.attention.kind=relative"],
    ["model.attention.kind=local", "model.attention.window=2"],
    ["model.attention={kind: multihead, kv_heads: 2}", "model.ffn.kind=swiglu", "model.norm.kind=rmsnorm"],
    ["model.decoder.layers=null", "model.decoder.groups=[{repeat: 1}, {repeat: 2, attention: {kind: relative}}]"],
]


def lm(overrides: list[str] | None = None) -> DecoderOnly:
    model = tiny_model(overrides, spec=LM)
    assert isinstance(model, DecoderOnly)
    return model


@pytest.mark.parametrize("overrides", VARIANTS)
def test_changing_a_later_token_never_changes_an_earlier_logit(overrides: list[str]) -> None:
    """Causal self-attention (§3.2.3): position i's logits depend on tokens 0..i only."""
    model = lm(overrides)
    tgt = torch.randint(4, 40, (2, 8))
    full = model(torch.empty(2, 0, dtype=torch.long), tgt)
    for t in range(tgt.size(1)):
        changed = tgt.clone()
        changed[:, t] = (changed[:, t] - 4 + 1) % 36 + 4  # another real token
        logits = model(torch.empty(2, 0, dtype=torch.long), changed)
        if t:
            assert (logits[:, :t] - full[:, :t]).abs().max() <= 1e-5
        assert (logits[:, t:] - full[:, t:]).abs().max() > 1e-4  # the change is seen from position t on


@pytest.mark.parametrize("overrides", VARIANTS)
def test_incremental_step_with_cache_equals_the_full_pass(overrides: list[str]) -> None:
    model = lm(overrides)
    tgt = torch.randint(4, 40, (3, 9))
    full = model.decode(tgt)
    cache = DecoderCache()
    steps = [model.decode(tgt[:, t:t + 1], cache) for t in range(tgt.size(1))]
    assert (torch.cat(steps, 1) - full).abs().max() <= 1e-5
    cache = DecoderCache()  # several positions at once after a cached prefix
    first, rest = model.decode(tgt[:, :4], cache), model.decode(tgt[:, 4:], cache)
    assert (torch.cat([first, rest], 1) - full).abs().max() <= 1e-5


def test_cache_reorder_follows_rows() -> None:
    """Beam search reorders the cached rows (DecoderCache.reorder): the next step is that of the rows kept."""
    model = lm()
    tgt = torch.randint(4, 40, (3, 5))
    cache = DecoderCache()
    model.decode(tgt[:, :4], cache)
    index = torch.tensor([2, 2, 0])
    cache.reorder(index)
    step = model.decode(tgt[index, 4:5], cache)
    assert (step - model.decode(tgt[index])[:, 4:5]).abs().max() <= 1e-5


def test_right_padding_leaves_the_real_positions_alone() -> None:
    model = lm()
    tgt = torch.randint(4, 40, (1, 6))
    padded = torch.cat([tgt, torch.zeros(1, 3, dtype=torch.long)], 1)
    assert (model.decode(padded)[:, :6] - model.decode(tgt)).abs().max() <= 1e-5


def test_forward_backward_reaches_every_parameter() -> None:
    model = lm().train()
    logits = model(torch.empty(3, 0, dtype=torch.long), torch.randint(4, 40, (3, 6)))
    assert logits.shape == (3, 6, 40)
    logits.logsumexp(-1).mean().backward()
    assert not [n for n, p in model.named_parameters() if p.grad is None]
