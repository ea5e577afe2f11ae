"""Multi-head attention against softmax(QKᵀ/√d_k)V computed by hand (§3.2.1, §3.2.2)."""

from __future__ import annotations

import math

import torch

from tbuild.components.attention import MultiHeadAttention, MultiHeadSpec

from .conftest import tiny_model


def _by_hand(att: MultiHeadAttention, x: torch.Tensor, mem: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
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
    torch.testing.assert_close(out, _by_hand(att, x, mem, allowed), atol=1e-5, rtol=1e-5)


def test_self_attention_without_mask() -> None:
    att = _attention()
    x = torch.randn(2, 5, 8)
    torch.testing.assert_close(att(x), _by_hand(att, x, x, torch.ones(2, 5, 5, dtype=torch.bool)),
                               atol=1e-5, rtol=1e-5)


def test_causal_self_attention_equals_eq1_with_triangular_mask() -> None:
    att = _attention(causal=True)
    x = torch.randn(2, 5, 8)
    allowed = torch.ones(5, 5, dtype=torch.bool).tril().expand(2, 5, 5)
    torch.testing.assert_close(att(x), _by_hand(att, x, x, allowed), atol=1e-5, rtol=1e-5)


def test_masked_positions_get_zero_weight() -> None:
    att = _attention()
    att.need_weights = True
    x, mem = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    pad = torch.tensor([[False, False, True, True, True], [False] * 5])
    att(x, mem, key_padding_mask=pad)
    w = att.last_weights
    assert w is not None and w.shape == (2, 2, 3, 5)
    assert torch.all(w[0, :, :, 2:] == 0)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 2, 3))
    # the explicit-weights path and the fused path agree
    att.need_weights = False
    fused = att(x, mem, key_padding_mask=pad)
    att.need_weights = True
    torch.testing.assert_close(att(x, mem, key_padding_mask=pad), fused, atol=1e-5, rtol=1e-5)


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
    """Padding a source sentence does not change its translation logits."""
    model = tiny_model()
    src = torch.randint(4, 40, (1, 5))
    padded = torch.cat([src, torch.zeros(1, 3, dtype=torch.long)], 1)
    tgt = torch.randint(4, 40, (1, 4))
    torch.testing.assert_close(model(src, tgt), model(padded, tgt), atol=1e-5, rtol=1e-5)
