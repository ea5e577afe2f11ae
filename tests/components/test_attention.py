"""Attention blocks against their definitions, computed by hand on small tensors: multi-head
(§3.2.1 Eq. 1, §3.2.2), grouped-/multi-query, additive (Bahdanau), local (§4 restricted) and
relative (Shaw et al.); masks, caches, explicit attention weights and the beams contract."""

from __future__ import annotations

import math

import pytest
import torch

from tbuild.builder import SpecError, load_spec
from tbuild.components import ATTENTION
from tbuild.components.attention import (
    AdditiveAttention,
    AdditiveSpec,
    LocalAttention,
    LocalSpec,
    MultiHeadAttention,
    MultiHeadSpec,
    RelativeAttention,
    RelativeSpec,
)
from tbuild.components.positional import ALiBi, ALiBiSpec
from tbuild.components.transformer import padding_mask

from ..conftest import TINY, tiny_model
from .reference import PAD, D, H, by_hand, close, dot, incremental, init, output_from_weights, qkv

# ----------------------------------------------------------------------------- multihead (Eq. 1)


def _eq1_by_hand(att: MultiHeadAttention, x: torch.Tensor, mem: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Eq. 1 per head with explicit loops; allowed (B, T, S) bool."""
    B, T, _ = x.shape
    outs = []
    for b in range(B):
        heads = []
        for h in range(att.heads):
            dk, dv = att.d_k, att.d_v
            wq = att.w_q.weight[h * dk:(h + 1) * dk]
            wk = att.w_k.weight[h * dk:(h + 1) * dk]
            wv = att.w_v.weight[h * dv:(h + 1) * dv]
            q = x[b] @ wq.T + att.w_q.bias[h * dk:(h + 1) * dk]
            k = mem[b] @ wk.T + att.w_k.bias[h * dk:(h + 1) * dk]
            v = mem[b] @ wv.T + att.w_v.bias[h * dv:(h + 1) * dv]
            scores = q @ k.T / math.sqrt(dk)
            scores = scores.masked_fill(~allowed[b], float("-inf"))
            heads.append(torch.softmax(scores, -1) @ v)
        outs.append(torch.cat(heads, -1) @ att.w_o.weight.T + att.w_o.bias)
    return torch.stack(outs)


def _attention(causal: bool = False, d_k: int = 3, d_v: int = 5) -> MultiHeadAttention:
    att = MultiHeadAttention(MultiHeadSpec(), d_model=8, heads=2, d_k=d_k, d_v=d_v, dropout=0.0, causal=causal)
    for p in att.parameters():
        torch.nn.init.normal_(p)
    return att.eval()


def test_cross_attention_equals_eq1_with_padding() -> None:
    att = _attention()
    x, mem = torch.randn(2, 4, 8), torch.randn(2, 6, 8)
    pad = torch.tensor([[False] * 6, [False] * 3 + [True] * 3])
    out = att(x, mem, key_padding_mask=pad)
    allowed = (~pad)[:, None, :].expand(2, 4, 6)
    torch.testing.assert_close(out, _eq1_by_hand(att, x, mem, allowed), atol=1e-5, rtol=1e-5)


def test_self_attention_without_mask() -> None:
    att = _attention()
    x = torch.randn(2, 5, 8)
    torch.testing.assert_close(att(x), _eq1_by_hand(att, x, x, torch.ones(2, 5, 5, dtype=torch.bool)),
                               atol=1e-5, rtol=1e-5)


def test_causal_self_attention_equals_eq1_with_triangular_mask() -> None:
    att = _attention(causal=True)
    x = torch.randn(2, 5, 8)
    allowed = torch.ones(5, 5, dtype=torch.bool).tril().expand(2, 5, 5)
    torch.testing.assert_close(att(x), _eq1_by_hand(att, x, x, allowed), atol=1e-5, rtol=1e-5)


def test_masked_positions_get_zero_weight() -> None:
    att = _attention()
    x, mem = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    pad = torch.tensor([[False, False, True, True, True], [False] * 5])
    w = att.attention_weights(x, mem, key_padding_mask=pad)
    assert w.shape == (2, 2, 3, 5)
    assert torch.all(w[0, :, :, 2:] == 0)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 2, 3))
    # the explicit weights are the ones the fused forward path uses
    torch.testing.assert_close(att(x, mem, key_padding_mask=pad), output_from_weights(att, w, mem),
                               atol=1e-5, rtol=1e-5)


def test_causal_mask_leaks_nothing() -> None:
    """Changing a later target token leaves earlier decoder outputs unchanged (§3.2.3)."""
    model = tiny_model()
    src = torch.randint(4, 40, (2, 6))
    tgt = torch.randint(4, 40, (2, 7))
    changed = tgt.clone()
    changed[:, 4] = (changed[:, 4] + 1) % 36 + 4
    a, b = model(src, tgt), model(src, changed)
    torch.testing.assert_close(a[:, :4], b[:, :4])
    assert not torch.allclose(a[:, 4:], b[:, 4:])


def test_source_padding_changes_nothing() -> None:
    """Padding a source sentence (told by its mask, whatever ids fill it) does not change its translation logits."""
    model = tiny_model()
    src = torch.randint(4, 40, (1, 5))
    padded = torch.cat([src, torch.randint(4, 40, (1, 3))], 1)
    pad = padding_mask(torch.tensor([5]), 8)
    tgt = torch.randint(4, 40, (1, 4))
    torch.testing.assert_close(model(src, tgt), model(padded, tgt, pad), atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------- additive


def test_additive_attention_is_v_tanh_of_summed_projections() -> None:
    att = init(AdditiveAttention(AdditiveSpec(), d_model=D, heads=H, d_k=3, d_v=5, dropout=0.0,
                                  causal=False))
    x, mem = torch.randn(2, 4, D, dtype=torch.float64), torch.randn(2, 6, D, dtype=torch.float64)
    out = att(x, mem, key_padding_mask=PAD)  # cross-attention over a padded memory
    hand, weights = by_hand(att, x, mem, (~PAD)[:, None, :].expand(2, 4, 6),
                            lambda h, i, j, q, k: att.v[h] @ torch.tanh(q + k))  # v_hᵀ tanh(q_i + k_j)
    close(out, hand)
    explicit = att.attention_weights(x, mem, key_padding_mask=PAD)
    close(explicit, weights)
    assert torch.all(explicit[1, :, :, 4:] == 0)


def test_additive_causal_self_attention_and_cache() -> None:
    att = init(AdditiveAttention(AdditiveSpec(), d_model=D, heads=H, d_k=3, d_v=5, dropout=0.0, causal=True))
    x = torch.randn(2, 5, D, dtype=torch.float64)
    allowed = torch.ones(5, 5, dtype=torch.bool).tril().expand(2, 5, 5)
    hand, _ = by_hand(att, x, x, allowed, lambda h, i, j, q, k: att.v[h] @ torch.tanh(q + k))
    close(att(x), hand)
    close(incremental(att, x), hand)
    assert not hasattr(att, "last_weights")  # forward keeps no state
    mha = MultiHeadAttention(MultiHeadSpec(), d_model=D, heads=H, d_k=3, d_v=5, dropout=0.0, causal=True)
    extra = sum(p.numel() for p in att.parameters()) - sum(p.numel() for p in mha.parameters())
    assert extra == H * 3 and att.v.shape == (H, 3)  # v_h per head: H·d_k beyond multihead's projections


# ----------------------------------------------------------------------------- local


def _band(T: int, S: int, r: int, causal: bool, offset: int = 0) -> torch.Tensor:
    """(T, S) allowed pairs written from the definition (§4): |i-j| ≤ r, or i-r ≤ j ≤ i."""
    return torch.tensor([[(i + offset - r <= j <= i + offset) if causal else abs(i + offset - j) <= r
                          for j in range(S)] for i in range(T)])


def test_local_encoder_attends_within_window_with_padding() -> None:
    att = init(LocalAttention(LocalSpec(window=1), d_model=D, heads=H, d_k=3, d_v=5, dropout=0.0,
                               causal=False))
    x = torch.randn(2, 6, D, dtype=torch.float64)
    allowed = _band(6, 6, 1, False) & (~PAD)[:, None, :]  # (B, T, S)
    out = att(x, key_padding_mask=PAD)
    hand, weights = by_hand(att, x, x, allowed, dot(3))
    close(out[0], hand[0])
    close(out[1, :4], hand[1, :4])  # real positions; padded queries (window all padding) keep themselves
    explicit = att.attention_weights(x, key_padding_mask=PAD)
    close(explicit[0], weights[0])
    assert torch.all(explicit[0, :, 0, 2:] == 0) and torch.isfinite(out).all()
    close(output_from_weights(att, explicit, x), out)  # the fused SDPA path agrees with the explicit one


@pytest.mark.parametrize("window", [1, 2])
def test_local_decoder_window_and_incremental_cache(window: int) -> None:
    att = init(LocalAttention(LocalSpec(window=window), d_model=D, heads=H, d_k=3, d_v=5, dropout=0.0,
                               causal=True))
    x = torch.randn(2, 6, D, dtype=torch.float64)
    hand, _ = by_hand(att, x, x, _band(6, 6, window, True).expand(2, 6, 6), dot(3))
    close(att(x), hand)
    close(incremental(att, x), hand)  # the window uses absolute positions (offset) with the cache
    cache: dict = {}
    first = att(x[:, :4], cache=cache)
    close(torch.cat([first, att(x[:, 4:], cache=cache, offset=4)], 1), hand)


def test_local_with_kv_heads_and_alibi_bias() -> None:
    att = init(LocalAttention(LocalSpec(window=2, kv_heads=1), d_model=D, heads=H, d_k=3, d_v=5, dropout=0.0,
                               causal=False))
    alibi = ALiBi(ALiBiSpec(), d_model=D, max_positions=None)
    x = torch.randn(1, 6, D, dtype=torch.float64)
    m = ALiBi.slopes(H)
    hand, _ = by_hand(att, x, x, _band(6, 6, 2, False)[None],
                       lambda h, i, j, q, k: q @ k / math.sqrt(3) - m[h] * abs(i - j))
    close(att(x, positional=alibi), hand)


def test_local_and_relative_refuse_cross_attention() -> None:
    for kind in ("local", "relative"):
        for where in ({"cross_attention": {"kind": kind}},
                      {"decoder": {"layers": 2, "cross_attention": {"kind": kind}}}):
            with pytest.raises(SpecError, match=f"{kind} attention is self-attention only"):
                load_spec({"model": {**TINY["model"], **where}})
    att = LocalAttention(LocalSpec(), d_model=D, heads=H, d_k=4, d_v=4, dropout=0.0, causal=False)
    with pytest.raises(ValueError, match="self-attention only"):
        att(torch.randn(1, 2, D), torch.randn(1, 3, D))
    # as self-attention they are fine, also in one group of a heterogeneous stack
    load_spec({"model": {**TINY["model"], "attention": {"kind": "local", "window": 2}}})
    load_spec({"model": {**TINY["model"], "encoder": {"heads": 4, "d_ff": 32, "groups": [
        {"repeat": 1, "attention": {"kind": "relative"}}, {"repeat": 1}]}}})


# ----------------------------------------------------------------------------- grouped-/multi-query


def test_multi_query_equals_one_shared_key_value_projection() -> None:
    """kv_heads=1: every head uses the same K = xW^K, V = xW^V (d_k, d_v wide), by hand."""
    att = init(MultiHeadAttention(MultiHeadSpec(kv_heads=1), d_model=D, heads=4, d_k=3, d_v=5, dropout=0.0,
                                   causal=True))
    assert att.w_k.weight.shape == (3, D) and att.w_v.weight.shape == (5, D)
    x = torch.randn(2, 5, D, dtype=torch.float64)
    K = x @ att.w_k.weight.T + att.w_k.bias  # (B, S, d_k), shared by all heads
    V = x @ att.w_v.weight.T + att.w_v.bias  # (B, S, d_v)
    heads = []
    for h in range(4):
        q = x @ att.w_q.weight[h * 3:(h + 1) * 3].T + att.w_q.bias[h * 3:(h + 1) * 3]  # (B, T, d_k)
        future = ~torch.ones(5, 5, dtype=torch.bool).tril()
        scores = (q @ K.transpose(1, 2) / math.sqrt(3)).masked_fill(future, -math.inf)  # (B, T, S)
        heads.append(scores.softmax(-1) @ V)
    expected = torch.cat(heads, -1) @ att.w_o.weight.T + att.w_o.bias
    close(att(x), expected)
    close(incremental(att, x), expected)


def test_grouped_query_head_h_reads_kv_head_h_div_group() -> None:
    att = init(MultiHeadAttention(MultiHeadSpec(kv_heads=2), d_model=D, heads=4, d_k=3, d_v=5, dropout=0.0,
                                   causal=False))
    x, mem = torch.randn(2, 4, D, dtype=torch.float64), torch.randn(2, 6, D, dtype=torch.float64)
    hand, _ = by_hand(att, x, mem, (~PAD)[:, None, :].expand(2, 4, 6), dot(3))  # _qkv: g = h // 2
    close(att(x, mem, key_padding_mask=PAD), hand)


def test_kv_heads_must_divide_heads_at_load_time() -> None:
    with pytest.raises(SpecError, match=r"model.attention: kv_heads \(3\) must divide encoder.heads \(4\)"):
        load_spec({"model": {**TINY["model"], "attention": {"kind": "multihead", "kv_heads": 3}}})
    with pytest.raises(SpecError, match=r"model.cross_attention: kv_heads \(8\) must divide decoder.heads"):
        load_spec({"model": {**TINY["model"], "cross_attention": {"kind": "multihead", "kv_heads": 8}}})


# ----------------------------------------------------------------------------- relative


def _relativeby_hand(att: RelativeAttention, x: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Shaw et al. 2018 §3.1-3.2: e_ij = q_i·(k_j + w^K_clip(j-i))/√d_z,
    z_i = Σ_j α_ij (v_j + w^V_clip(j-i))."""
    k = att.max_distance

    def row(i: int, j: int) -> int:
        return max(-k, min(k, j - i)) + k  # clip(j-i, k), shifted to a table row

    out, _ = by_hand(att, x, x, allowed,
                      lambda h, i, j, q, kj: q @ (kj + att.rel_k[row(i, j)]) / math.sqrt(att.d_k),
                      lambda i, j: att.rel_v[row(i, j)])
    return out


def test_relative_encoder_with_clipping_and_padding() -> None:
    att = init(RelativeAttention(RelativeSpec(max_distance=2), d_model=D, heads=H, d_k=3, d_v=5, dropout=0.0,
                                  causal=False))
    assert att.rel_k.shape == (5, 3) and att.rel_v.shape == (5, 5)  # 2k+1 rows
    x = torch.randn(2, 6, D, dtype=torch.float64)  # distances up to 5 > k: clipping is exercised
    close(att(x, key_padding_mask=PAD), _relativeby_hand(att, x, (~PAD)[:, None, :].expand(2, 6, 6)))


def test_relative_decoder_incremental_equals_full() -> None:
    att = init(RelativeAttention(RelativeSpec(max_distance=2), d_model=D, heads=H, d_k=3, d_v=5, dropout=0.0,
                                  causal=True))
    assert att.rel_k.shape == (3, 3)  # causal: distances -k..0 only, k+1 rows
    x = torch.randn(2, 6, D, dtype=torch.float64)
    hand = _relativeby_hand(att, x, torch.ones(6, 6, dtype=torch.bool).tril().expand(2, 6, 6))
    close(att(x), hand)
    close(incremental(att, x), hand)


def test_relative_is_translation_invariant_without_positions() -> None:
    """Same tokens shifted right behind a masked prefix give the same outputs (only j-i matters)."""
    att = init(RelativeAttention(RelativeSpec(max_distance=2), d_model=D, heads=H, d_k=3, d_v=5, dropout=0.0,
                                  causal=False))
    x = torch.randn(1, 4, D, dtype=torch.float64)
    shifted = torch.cat([torch.randn(1, 3, D, dtype=torch.float64), x], 1)
    pad = torch.tensor([[True] * 3 + [False] * 4])
    close(att(shifted, key_padding_mask=pad)[:, 3:], att(x))


# ----------------------------------------------------------------------------- explicit weights, beams


def _block(kind: str, causal: bool) -> torch.nn.Module:
    """A float64 block of a registered kind with default spec fields (d_k = d_v = 4)."""
    spec = ATTENTION[kind].spec()
    return init(ATTENTION.build(spec, d_model=D, heads=H, d_k=4, d_v=4, dropout=0.0, causal=causal))


def test_multihead_weights_equal_softmax_qk_by_hand() -> None:
    att = init(MultiHeadAttention(MultiHeadSpec(), d_model=D, heads=H, d_k=3, d_v=5, dropout=0.0, causal=False))
    x, mem = torch.randn(2, 4, D, dtype=torch.float64), torch.randn(2, 6, D, dtype=torch.float64)
    w = att.attention_weights(x, mem, key_padding_mask=PAD)
    for b in range(2):
        for h in range(H):
            q, k, _ = qkv(att, b, h, x, mem)
            scores = (q @ k.T / math.sqrt(3)).masked_fill(PAD[b], -math.inf)  # QKᵀ/√d_k (Eq. 1)
            close(w[b, h], scores.softmax(-1))


@pytest.mark.parametrize("causal", [False, True], ids=["encoder", "decoder"])
@pytest.mark.parametrize("kind", list(ATTENTION))
def test_weights_are_distributions_and_leave_no_state(kind: str, causal: bool) -> None:
    att = _block(kind, causal)
    before = {name: t.clone() for name, t in att.state_dict().items()}
    attributes = set(vars(att))
    x = torch.randn(2, 6, D, dtype=torch.float64)
    w = att.attention_weights(x, key_padding_mask=PAD)
    assert w.shape == (2, H, 6, 6)
    close(w.sum(-1), torch.ones(2, H, 6, dtype=torch.float64))  # every row a distribution
    assert torch.all(w[1, :, :4, 4:] == 0)  # real queries give padding nothing
    if causal:
        assert torch.all(w.triu(1) == 0)  # nor later positions (§3.2.3)
    att(x, key_padding_mask=PAD)
    assert set(vars(att)) == attributes
    assert all(torch.equal(t, before[name]) for name, t in att.state_dict().items())


@pytest.mark.parametrize("kind", [k for k in ATTENTION if not ATTENTION[k].block.self_attention_only])
def test_beams_share_memory_rows_in_weights_and_outputs(kind: str) -> None:
    att = _block(kind, False)
    x, mem = torch.randn(4, 3, D, dtype=torch.float64), torch.randn(2, 6, D, dtype=torch.float64)
    copied = mem.repeat_interleave(2, 0), PAD.repeat_interleave(2, 0)  # memory row per beam
    w = att.attention_weights(x, mem, key_padding_mask=PAD, beams=2)
    close(w, att.attention_weights(x, copied[0], key_padding_mask=copied[1]))
    close(w.sum(-1), torch.ones(4, H, 3, dtype=torch.float64))
    close(att(x, mem, key_padding_mask=PAD, beams=2), att(x, copied[0], key_padding_mask=copied[1]))


def test_query_rows_must_equal_memory_rows_times_beams() -> None:
    att = _block("multihead", False)
    x, mem = torch.randn(4, 3, D, dtype=torch.float64), torch.randn(2, 5, D, dtype=torch.float64)
    with pytest.raises(ValueError, match="4 query rows do not match 2 memory rows × 1 beams"):
        att(x, mem)  # divides evenly, but beams were not declared
    with pytest.raises(ValueError, match="4 query rows do not match 2 memory rows × 3 beams"):
        att(x, mem, beams=3)
    with pytest.raises(ValueError, match="3 query rows do not match 2 memory rows × 1 beams"):
        att(x[:3], mem)
    with pytest.raises(ValueError, match="cross-attention only"):
        att(x, beams=2)
    model = tiny_model()
    memory, pad = model.encode(torch.randint(4, 40, (2, 5)))
    with pytest.raises(ValueError, match="4 query rows do not match 2 memory rows × 1 beams"):
        model.decode(torch.randint(4, 40, (4, 3)), memory, pad)
    assert model.decode(torch.randint(4, 40, (4, 3)), memory, pad, beams=2).shape == (4, 3, 40)
