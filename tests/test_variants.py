"""Component variants against their definitions, on small tensors with hand computations.

Attention: additive (Bahdanau), local (§4 restricted), grouped-/multi-query, relative (Shaw et al.);
positional: rope, alibi, none; norm: rmsnorm, pre/post final norms; ffn: relu, gelu, swiglu;
heterogeneous stacks; parameter counts shown by ``tbuild inspect``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tbuild.builder import SpecError, build_model, load_spec
from tbuild.builder.inspect import inspect_model
from tbuild.cli.app import app
from tbuild.components.attention import (
    AdditiveAttention,
    AdditiveSpec,
    AttentionBlock,
    LocalAttention,
    LocalSpec,
    MultiHeadAttention,
    MultiHeadSpec,
    RelativeAttention,
    RelativeSpec,
)
from tbuild.components.feedforward import GELUFFN, GELUFFNSpec, ReLUFFN, ReLUFFNSpec, SwiGLUFFN, SwiGLUFFNSpec
from tbuild.components.norm import LayerNorm, RMSNorm, RMSNormSpec
from tbuild.components.positional import ALiBi, ALiBiSpec, NoPosition, NoPositionSpec, Rotary, RotarySpec

from .conftest import TINY, tiny_model

D, H = 8, 2  # d_model and heads of the block-level tests (d_k, d_v per test)
Score = Callable[[int, int, int, torch.Tensor, torch.Tensor], torch.Tensor]  # (h, i, j, q_i, k_j) -> logit
Extra = Callable[[int, int], torch.Tensor]  # (i, j) -> a vector added to v_j


def _init(att: AttentionBlock) -> AttentionBlock:
    """Random non-zero weights in float64, so hand computations agree to 1e-10."""
    att = att.double()
    for p in att.parameters():
        torch.nn.init.normal_(p, std=0.5)
    return att.eval()


def _qkv(att: AttentionBlock, b: int, h: int, x: torch.Tensor, mem: torch.Tensor):  # noqa: ANN202
    """Query head h and the key/value head it reads (head h // (H/Hkv)) for sentence b."""
    g = h // (att.heads // att.kv_heads)
    dk, dv = att.d_k, att.d_v
    q = x[b] @ att.w_q.weight[h * dk:(h + 1) * dk].T + att.w_q.bias[h * dk:(h + 1) * dk]
    k = mem[b] @ att.w_k.weight[g * dk:(g + 1) * dk].T + att.w_k.bias[g * dk:(g + 1) * dk]
    v = mem[b] @ att.w_v.weight[g * dv:(g + 1) * dv].T + att.w_v.bias[g * dv:(g + 1) * dv]
    return q, k, v


def _by_hand(att: AttentionBlock, x: torch.Tensor, mem: torch.Tensor, allowed: torch.Tensor, score: Score,
             value_extra: Extra | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Loops over sentence b, head h, query i: α_i = softmax over allowed j of score(h, i, j, q_i, k_j),
    z_i = Σ_j α_ij (v_j + value_extra(i, j)); heads concatenated and projected by W^O (§3.2.2).
    allowed (B, T, S) bool. Returns the output (B, T, D) and the weights (B, H, T, S)."""
    B, T, S = allowed.shape
    outs, weights = [], torch.zeros(B, att.heads, T, S, dtype=x.dtype)
    for b in range(B):
        heads = []
        for h in range(att.heads):
            q, k, v = _qkv(att, b, h, x, mem)
            z = torch.zeros(T, att.d_v, dtype=x.dtype)
            for i in range(T):
                logits = torch.stack([score(h, i, j, q[i], k[j]) if allowed[b, i, j] else
                                      torch.tensor(-math.inf, dtype=x.dtype) for j in range(S)])
                alpha = logits.softmax(0)
                weights[b, h, i] = alpha
                for j in range(S):
                    if allowed[b, i, j]:
                        z[i] += alpha[j] * (v[j] + (value_extra(i, j) if value_extra is not None else 0.0))
            heads.append(z)
        outs.append(torch.cat(heads, -1) @ att.w_o.weight.T + att.w_o.bias)
    return torch.stack(outs), weights


def _dot(d_k: int) -> Score:
    return lambda h, i, j, q, k: q @ k / math.sqrt(d_k)  # Eq. 1


def _close(a: torch.Tensor, b: torch.Tensor) -> None:
    torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-10)


def _incremental(att: AttentionBlock, x: torch.Tensor, positional=None) -> torch.Tensor:  # noqa: ANN001
    """Feed x one position at a time through the K/V cache, at absolute offsets 0..T-1."""
    cache: dict = {}
    return torch.cat([att(x[:, t:t + 1], cache=cache, positional=positional, offset=t)
                      for t in range(x.size(1))], 1)


PAD = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])  # (B, S): sentence 1 has 2 pads


# ----------------------------------------------------------------------------- additive


def test_additive_attention_is_v_tanh_of_summed_projections() -> None:
    att = _init(AdditiveAttention(AdditiveSpec(), d_model=D, heads=H, d_k=3, d_v=5, dropout=0.0,
                                  causal=False))
    att.need_weights = True
    x, mem = torch.randn(2, 4, D, dtype=torch.float64), torch.randn(2, 6, D, dtype=torch.float64)
    out = att(x, mem, key_padding_mask=PAD)  # cross-attention over a padded memory
    hand, weights = _by_hand(att, x, mem, (~PAD)[:, None, :].expand(2, 4, 6),
                             lambda h, i, j, q, k: att.v[h] @ torch.tanh(q + k))  # v_hᵀ tanh(q_i + k_j)
    _close(out, hand)
    _close(att.last_weights, weights)
    assert torch.all(att.last_weights[1, :, :, 4:] == 0)


def test_additive_causal_self_attention_and_cache() -> None:
    att = _init(AdditiveAttention(AdditiveSpec(), d_model=D, heads=H, d_k=3, d_v=5, dropout=0.0, causal=True))
    x = torch.randn(2, 5, D, dtype=torch.float64)
    allowed = torch.ones(5, 5, dtype=torch.bool).tril().expand(2, 5, 5)
    hand, _ = _by_hand(att, x, x, allowed, lambda h, i, j, q, k: att.v[h] @ torch.tanh(q + k))
    _close(att(x), hand)
    _close(_incremental(att, x), hand)
    assert att.last_weights is None  # only kept when asked for
    mha = MultiHeadAttention(MultiHeadSpec(), d_model=D, heads=H, d_k=3, d_v=5, dropout=0.0, causal=True)
    extra = sum(p.numel() for p in att.parameters()) - sum(p.numel() for p in mha.parameters())
    assert extra == H * 3 and att.v.shape == (H, 3)  # v_h per head: H·d_k beyond multihead's projections


# ----------------------------------------------------------------------------- local


def _band(T: int, S: int, r: int, causal: bool, offset: int = 0) -> torch.Tensor:
    """(T, S) allowed pairs written from the definition (§4): |i-j| ≤ r, or i-r ≤ j ≤ i."""
    return torch.tensor([[(i + offset - r <= j <= i + offset) if causal else abs(i + offset - j) <= r
                          for j in range(S)] for i in range(T)])


def test_local_encoder_attends_within_window_with_padding() -> None:
    att = _init(LocalAttention(LocalSpec(window=1), d_model=D, heads=H, d_k=3, d_v=5, dropout=0.0,
                               causal=False))
    att.need_weights = True
    x = torch.randn(2, 6, D, dtype=torch.float64)
    allowed = _band(6, 6, 1, False) & (~PAD)[:, None, :]  # (B, T, S)
    out = att(x, key_padding_mask=PAD)
    hand, weights = _by_hand(att, x, x, allowed, _dot(3))
    _close(out[0], hand[0])
    _close(out[1, :4], hand[1, :4])  # real positions; padded queries (window all padding) keep themselves
    _close(att.last_weights[0], weights[0])
    assert torch.all(att.last_weights[0, :, 0, 2:] == 0) and torch.isfinite(out).all()
    att.need_weights = False  # the fused SDPA path agrees with the explicit one
    _close(att(x, key_padding_mask=PAD), out)


@pytest.mark.parametrize("window", [1, 2])
def test_local_decoder_window_and_incremental_cache(window: int) -> None:
    att = _init(LocalAttention(LocalSpec(window=window), d_model=D, heads=H, d_k=3, d_v=5, dropout=0.0,
                               causal=True))
    x = torch.randn(2, 6, D, dtype=torch.float64)
    hand, _ = _by_hand(att, x, x, _band(6, 6, window, True).expand(2, 6, 6), _dot(3))
    _close(att(x), hand)
    _close(_incremental(att, x), hand)  # the window uses absolute positions (offset) with the cache
    cache: dict = {}
    first = att(x[:, :4], cache=cache)
    _close(torch.cat([first, att(x[:, 4:], cache=cache, offset=4)], 1), hand)


def test_local_with_kv_heads_and_alibi_bias() -> None:
    att = _init(LocalAttention(LocalSpec(window=2, kv_heads=1), d_model=D, heads=H, d_k=3, d_v=5, dropout=0.0,
                               causal=False))
    alibi = ALiBi(ALiBiSpec(), d_model=D, max_positions=None)
    x = torch.randn(1, 6, D, dtype=torch.float64)
    m = ALiBi.slopes(H)
    hand, _ = _by_hand(att, x, x, _band(6, 6, 2, False)[None],
                       lambda h, i, j, q, k: q @ k / math.sqrt(3) - m[h] * abs(i - j))
    _close(att(x, positional=alibi), hand)


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
    att = _init(MultiHeadAttention(MultiHeadSpec(kv_heads=1), d_model=D, heads=4, d_k=3, d_v=5, dropout=0.0,
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
    _close(att(x), expected)
    _close(_incremental(att, x), expected)


def test_grouped_query_head_h_reads_kv_head_h_div_group() -> None:
    att = _init(MultiHeadAttention(MultiHeadSpec(kv_heads=2), d_model=D, heads=4, d_k=3, d_v=5, dropout=0.0,
                                   causal=False))
    x, mem = torch.randn(2, 4, D, dtype=torch.float64), torch.randn(2, 6, D, dtype=torch.float64)
    hand, _ = _by_hand(att, x, mem, (~PAD)[:, None, :].expand(2, 4, 6), _dot(3))  # _qkv: g = h // 2
    _close(att(x, mem, key_padding_mask=PAD), hand)


def test_kv_heads_must_divide_heads_at_load_time() -> None:
    with pytest.raises(SpecError, match=r"model.attention: kv_heads \(3\) must divide encoder.heads \(4\)"):
        load_spec({"model": {**TINY["model"], "attention": {"kind": "multihead", "kv_heads": 3}}})
    with pytest.raises(SpecError, match=r"model.cross_attention: kv_heads \(8\) must divide decoder.heads"):
        load_spec({"model": {**TINY["model"], "cross_attention": {"kind": "multihead", "kv_heads": 8}}})


# ----------------------------------------------------------------------------- relative


def _relative_by_hand(att: RelativeAttention, x: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Shaw et al. 2018 §3.1-3.2: e_ij = q_i·(k_j + w^K_clip(j-i))/√d_z,
    z_i = Σ_j α_ij (v_j + w^V_clip(j-i))."""
    k = att.max_distance

    def row(i: int, j: int) -> int:
        return max(-k, min(k, j - i)) + k  # clip(j-i, k), shifted to a table row

    out, _ = _by_hand(att, x, x, allowed,
                      lambda h, i, j, q, kj: q @ (kj + att.rel_k[row(i, j)]) / math.sqrt(att.d_k),
                      lambda i, j: att.rel_v[row(i, j)])
    return out


def test_relative_encoder_with_clipping_and_padding() -> None:
    att = _init(RelativeAttention(RelativeSpec(max_distance=2), d_model=D, heads=H, d_k=3, d_v=5, dropout=0.0,
                                  causal=False))
    assert att.rel_k.shape == (5, 3) and att.rel_v.shape == (5, 5)  # 2k+1 rows
    x = torch.randn(2, 6, D, dtype=torch.float64)  # distances up to 5 > k: clipping is exercised
    _close(att(x, key_padding_mask=PAD), _relative_by_hand(att, x, (~PAD)[:, None, :].expand(2, 6, 6)))


def test_relative_decoder_incremental_equals_full() -> None:
    att = _init(RelativeAttention(RelativeSpec(max_distance=2), d_model=D, heads=H, d_k=3, d_v=5, dropout=0.0,
                                  causal=True))
    assert att.rel_k.shape == (3, 3)  # causal: distances -k..0 only, k+1 rows
    x = torch.randn(2, 6, D, dtype=torch.float64)
    hand = _relative_by_hand(att, x, torch.ones(6, 6, dtype=torch.bool).tril().expand(2, 6, 6))
    _close(att(x), hand)
    _close(_incremental(att, x), hand)


def test_relative_is_translation_invariant_without_positions() -> None:
    """Same tokens shifted right behind a masked prefix give the same outputs (only j-i matters)."""
    att = _init(RelativeAttention(RelativeSpec(max_distance=2), d_model=D, heads=H, d_k=3, d_v=5, dropout=0.0,
                                  causal=False))
    x = torch.randn(1, 4, D, dtype=torch.float64)
    shifted = torch.cat([torch.randn(1, 3, D, dtype=torch.float64), x], 1)
    pad = torch.tensor([[True] * 3 + [False] * 4])
    _close(att(shifted, key_padding_mask=pad)[:, 3:], att(x))


# ----------------------------------------------------------------------------- parameter counts


def _attention_params(d: int, heads: int, d_k: int, kv_heads: int | None = None) -> int:
    kv = kv_heads or heads
    return (d * heads * d_k + heads * d_k) + 2 * (d * kv * d_k + kv * d_k) + (heads * d_k * d + d)


@pytest.mark.parametrize("attention,enc_extra,dec_extra,kv", [
    ({"kind": "multihead"}, 0, 0, None),
    ({"kind": "local", "window": 2}, 0, 0, None),
    ({"kind": "multihead", "kv_heads": 1}, 0, 0, 1),
    ({"kind": "additive"}, 4 * 4, 4 * 4, None),  # v_h: H·d_k
    ({"kind": "relative", "max_distance": 3}, 7 * (4 + 4), 4 * (4 + 4), None),  # (2k+1), (k+1) rows
])
def test_inspect_counts_attention_parameters(attention: dict, enc_extra: int, dec_extra: int,
                                             kv: int | None) -> None:
    spec = load_spec({"model": {**TINY["model"], "attention": attention}}).spec  # D 16, H 4, d_k = d_v = 4
    net = build_model(spec)
    report = inspect_model(spec, net)
    rows = {r.block.split(" ")[0]: r for r in report.rows if "layers" in r.block}
    self_attn = _attention_params(16, 4, 4, kv)
    assert f"self-attention {self_attn + enc_extra:,}," in rows["encoder"].note
    assert f"self-attention {self_attn + dec_extra:,}," in rows["decoder"].note
    assert report.total == sum(p.numel() for p in net.parameters())  # tied matrices once


# ----------------------------------------------------------------------------- positional


def test_rope_rotates_2d_pairs_by_position_times_theta() -> None:
    rope = Rotary(RotarySpec(base=100.0), d_model=4, max_positions=None)
    # 2-d: θ_0 = 1, so position m rotates (1, 0) to (cos m, sin m)
    e = torch.tensor([[[[1.0, 0.0]]]])  # (B, H, T=1, 2)
    for m in range(4):
        expected = torch.tensor([[[[math.cos(m), math.sin(m)]]]], dtype=torch.float64)
        _close(rope.rotate(e.double(), offset=m), expected)
    # 4-d: pairs (0, 1) and (2, 3) rotate by m·1 and m·100^(-2/4) = m·0.1
    t = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    m = 3
    expected = []
    for (a, b), theta in (((1.0, 2.0), 1.0), ((3.0, 4.0), 0.1)):
        c, s = math.cos(m * theta), math.sin(m * theta)
        expected += [c * a - s * b, s * a + c * b]
    _close(rope.rotate(t.view(1, 1, 1, 4), offset=m).flatten(), torch.tensor(expected, dtype=torch.float64))


def test_rope_preserves_norms_and_dot_products_depend_on_offset_only() -> None:
    rope = Rotary(RotarySpec(), d_model=8, max_positions=None)
    x = torch.randn(2, 3, 7, 8, dtype=torch.float64)  # (B, H, T, d_k)
    torch.testing.assert_close(rope.rotate(x, offset=5).norm(dim=-1), x.norm(dim=-1))
    q, k = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)

    def dot(m: int, n: int) -> torch.Tensor:
        return rope.rotate(q.view(1, 1, 1, 8), m).flatten() @ rope.rotate(k.view(1, 1, 1, 8), n).flatten()

    for m, n in ((0, 3), (2, 0), (4, 4)):
        for shift in (1, 7, 50):
            torch.testing.assert_close(dot(m, n), dot(m + shift, n + shift))
    assert not torch.allclose(dot(0, 3), dot(0, 4))


def test_rope_inside_attention_cached_equals_full() -> None:
    att = _init(MultiHeadAttention(MultiHeadSpec(), d_model=D, heads=H, d_k=4, d_v=4, dropout=0.0,
                                   causal=True))
    rope = Rotary(RotarySpec(), d_model=D, max_positions=None)
    x = torch.randn(2, 5, D, dtype=torch.float64)
    _close(_incremental(att, x, rope), att(x, positional=rope))


def test_alibi_bias_is_minus_slope_times_distance() -> None:
    alibi = ALiBi(ALiBiSpec(), d_model=D, max_positions=None)
    torch.testing.assert_close(ALiBi.slopes(8), torch.tensor([2.0**-h for h in range(1, 9)]))  # 1/2..1/256
    torch.testing.assert_close(ALiBi.slopes(4), torch.tensor([2.0 ** (-8 * h / 4) for h in range(1, 5)]))
    bias = alibi.attn_bias(4, 2, 5, offset=3)  # queries at positions 3, 4; keys 0..4
    for h in range(4):
        m = 2.0 ** (-8 * (h + 1) / 4)
        for i in range(2):
            for j in range(5):
                assert math.isclose(bias[h, i, j].item(), -m * abs(i + 3 - j), abs_tol=1e-6)
    # the encoder sees the symmetric distance |i-j|
    full = alibi.attn_bias(2, 4, 4)
    torch.testing.assert_close(full, full.transpose(-2, -1))


def test_alibi_in_attention_equals_biased_eq1() -> None:
    att = _init(MultiHeadAttention(MultiHeadSpec(), d_model=D, heads=H, d_k=3, d_v=5, dropout=0.0,
                                   causal=True))
    alibi = ALiBi(ALiBiSpec(), d_model=D, max_positions=None)
    x = torch.randn(2, 5, D, dtype=torch.float64)
    m = ALiBi.slopes(H).double()
    hand, _ = _by_hand(att, x, x, torch.ones(5, 5, dtype=torch.bool).tril().expand(2, 5, 5),
                       lambda h, i, j, q, k: q @ k / math.sqrt(3) - m[h] * abs(i - j))
    _close(att(x, positional=alibi), hand)
    _close(_incremental(att, x, alibi), hand)


def test_no_positions_make_the_encoder_permutation_equivariant() -> None:
    none = NoPosition(NoPositionSpec(), d_model=4, max_positions=None)
    x = torch.randn(1, 3, 4)
    assert none(x, 5) is x and none.rotate(x, 2) is x and none.attn_bias(2, 3, 3) is None
    model = tiny_model(["model.positional.kind=none"])
    src = torch.tensor([[5, 6, 7, 8]])
    perm = torch.tensor([2, 0, 3, 1])
    memory, _ = model.encode(src)
    permuted, _ = model.encode(src[:, perm])
    torch.testing.assert_close(permuted, memory[:, perm], atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------- norms


def test_rmsnorm_matches_hand_formula() -> None:
    norm = RMSNorm(RMSNormSpec(eps=1e-6), d_model=4)
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([1.0, 2.0, 0.5, -1.0]))
    x = torch.tensor([[1.0, -2.0, 3.0, 0.5]])
    rms = math.sqrt((1 + 4 + 9 + 0.25) / 4 + 1e-6)  # sqrt(mean(x²) + eps), no mean subtraction
    expected = torch.tensor([[1 / rms * 1, -2 / rms * 2, 3 / rms * 0.5, 0.5 / rms * -1]])
    torch.testing.assert_close(norm(x), expected)
    assert sum(p.numel() for p in norm.parameters()) == 4  # gain only, no bias


@pytest.mark.parametrize("placement,final,expected", [
    ("pre", None, True), ("post", None, False), ("pre", False, False), ("post", True, True)])
def test_final_norms_follow_placement(placement: str, final: bool | None, expected: bool) -> None:
    sets = [f"model.norm_placement={placement}", "model.norm.kind=rmsnorm"]
    if final is not None:
        sets.append(f"model.final_norm={str(final).lower()}")
    model = tiny_model(sets)
    assert (model.encoder_norm is not None) is expected and (model.decoder_norm is not None) is expected
    if expected:
        assert isinstance(model.encoder_norm, RMSNorm) and isinstance(model.decoder_norm, RMSNorm)
    assert all(layer.self_attn.pre_norm is (placement == "pre") for layer in model.encoder)


def test_pre_norm_residual_is_x_plus_sublayer_of_norm() -> None:
    model = tiny_model(["model.norm_placement=pre"])
    res = model.encoder[0].ffn
    x = torch.randn(2, 3, 16)
    torch.testing.assert_close(res(x), x + res.sublayer(res.norm(x)))
    post = tiny_model().encoder[0].ffn
    assert isinstance(post.norm, LayerNorm)
    torch.testing.assert_close(post(x), post.norm(x + post.sublayer(x)))


# ----------------------------------------------------------------------------- feed-forward


def test_relu_and_gelu_ffn_match_hand_formulas() -> None:
    x = torch.randn(2, 3, 6)
    relu = ReLUFFN(ReLUFFNSpec(), d_model=6, d_ff=10, dropout=0.0)
    w1, b1, w2, b2 = relu.w1.weight, relu.w1.bias, relu.w2.weight, relu.w2.bias
    torch.testing.assert_close(relu(x), torch.clamp(x @ w1.T + b1, min=0) @ w2.T + b2)  # Eq. 2
    gelu = GELUFFN(GELUFFNSpec(), d_model=6, d_ff=10, dropout=0.0)
    w1, b1, w2, b2 = gelu.w1.weight, gelu.w1.bias, gelu.w2.weight, gelu.w2.bias
    a = x @ w1.T + b1
    torch.testing.assert_close(gelu(x), 0.5 * a * (1 + torch.erf(a / math.sqrt(2))) @ w2.T + b2)  # x·Φ(x)


def test_swiglu_matches_hand_formula_and_parameter_count() -> None:
    ffn = SwiGLUFFN(SwiGLUFFNSpec(), d_model=6, d_ff=10, dropout=0.0)
    x = torch.randn(2, 3, 6)
    a, gate = x @ ffn.w1.weight.T, x @ ffn.v.weight.T
    expected = (a * torch.sigmoid(a) * gate) @ ffn.w2.weight.T  # (Swish_1(xW) ⊗ xV) W2, Shazeer 2020
    torch.testing.assert_close(ffn(x), expected)
    assert sum(p.numel() for p in ffn.parameters()) == 3 * 6 * 10  # no biases


# ----------------------------------------------------------------------------- heterogeneous stacks

LOCAL3 = {"kind": "local", "window": 3}
HETERO = {"model": {**TINY["model"], "encoder": {
    "heads": 4, "d_ff": 32, "groups": [{"repeat": 4, "attention": LOCAL3}, {"repeat": 2}]}}}


def test_heterogeneous_stack_builds_groups_in_order() -> None:
    spec = load_spec(HETERO).spec
    assert spec.model.encoder.layers == 6
    net = build_model(spec)
    kinds = [type(layer.self_attn.sublayer) for layer in net.encoder]
    assert kinds == [LocalAttention] * 4 + [MultiHeadAttention] * 2
    assert all(layer.self_attn.sublayer.window == 3 for layer in net.encoder[:4])
    assert [type(layer.self_attn.sublayer) for layer in net.decoder] == [MultiHeadAttention] * 2


def test_inspect_shows_one_row_per_group(tmp_path: Path) -> None:
    import yaml

    path = tmp_path / "hetero.yaml"
    path.write_text(yaml.safe_dump(HETERO))
    runner = CliRunner()
    text = runner.invoke(app, ["inspect", str(path)], env={"COLUMNS": "220"})
    assert text.exit_code == 0, text.output
    assert "encoder layers 0–3 (×4)" in text.output and "local/relu/layernorm" in text.output
    assert "encoder layers 4–5 (×2)" in text.output and "multihead/relu/layernorm" in text.output
    assert "decoder layers 0–1 (×2)" in text.output
    result = runner.invoke(app, ["inspect", str(path), "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["block"]: r for r in json.loads(result.output)["rows"]}
    net = build_model(load_spec(HETERO).spec)
    per_layer = sum(p.numel() for p in net.encoder[0].parameters())
    assert rows["encoder layers 0–3 (×4)"]["params"] == 4 * per_layer
    assert rows["encoder layers 4–5 (×2)"]["params"] == 2 * per_layer  # local adds no parameters
    assert rows["encoder layers 0–3 (×4)"]["kind"] == "local/relu/layernorm"
