"""Reference computations of attention by hand (explicit loops over sentence, head and query), shared
by the attention and positional tests."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from tbuild.components.attention import AttentionBlock

D, H = 8, 2  # d_model and heads of the block-level tests (d_k, d_v per test)
Score = Callable[[int, int, int, torch.Tensor, torch.Tensor], torch.Tensor]  # (h, i, j, q_i, k_j) -> logit
Extra = Callable[[int, int], torch.Tensor]  # (i, j) -> a vector added to v_j


def init(att: AttentionBlock) -> AttentionBlock:
    """Random non-zero weights in float64, so hand computations agree to 1e-10."""
    att = att.double()
    for p in att.parameters():
        torch.nn.init.normal_(p, std=0.5)
    return att.eval()


def qkv(att: AttentionBlock, b: int, h: int, x: torch.Tensor, mem: torch.Tensor):  # noqa: ANN202
    """Query head h and the key/value head it reads (head h // (H/Hkv)) for sentence b."""
    g = h // (att.heads // att.kv_heads)
    dk, dv = att.d_k, att.d_v
    q = x[b] @ att.w_q.weight[h * dk:(h + 1) * dk].T + att.w_q.bias[h * dk:(h + 1) * dk]
    k = mem[b] @ att.w_k.weight[g * dk:(g + 1) * dk].T + att.w_k.bias[g * dk:(g + 1) * dk]
    v = mem[b] @ att.w_v.weight[g * dv:(g + 1) * dv].T + att.w_v.bias[g * dv:(g + 1) * dv]
    return q, k, v


def by_hand(att: AttentionBlock, x: torch.Tensor, mem: torch.Tensor, allowed: torch.Tensor, score: Score,
             value_extra: Extra | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Loops over sentence b, head h, query i: α_i = softmax over allowed j of score(h, i, j, q_i, k_j),
    z_i = Σ_j α_ij (v_j + value_extra(i, j)); heads concatenated and projected by W^O (§3.2.2).
    allowed (B, T, S) bool. Returns the output (B, T, D) and the weights (B, H, T, S)."""
    B, T, S = allowed.shape
    outs, weights = [], torch.zeros(B, att.heads, T, S, dtype=x.dtype)
    for b in range(B):
        heads = []
        for h in range(att.heads):
            q, k, v = qkv(att, b, h, x, mem)
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


def dot(d_k: int) -> Score:
    return lambda h, i, j, q, k: q @ k / math.sqrt(d_k)  # Eq. 1


def close(a: torch.Tensor, b: torch.Tensor) -> None:
    torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-10)


def incremental(att: AttentionBlock, x: torch.Tensor, positional=None) -> torch.Tensor:  # noqa: ANN001
    """Feed x one position at a time through the K/V cache, at absolute offsets 0..T-1."""
    cache: dict = {}
    return torch.cat([att(x[:, t:t + 1], cache=cache, positional=positional, offset=t)
                      for t in range(x.size(1))], 1)


PAD = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])  # (B, S): sentence 1 has 2 pads


def output_from_weights(att: AttentionBlock, weights: torch.Tensor, mem: torch.Tensor) -> torch.Tensor:
    """W^O concat_h(α_h V_h) (§3.2.2) for weights (B, H, T, S) over memory (B, S, D), K/V heads
    shared as in grouped-query attention: the output the weights imply for plain dot-product kinds."""
    v = att.w_v(mem).unflatten(-1, (att.kv_heads, att.d_v)).transpose(1, 2)  # (B, Hkv, S, d_v)
    v = v.repeat_interleave(att.heads // att.kv_heads, dim=1)  # (B, H, S, d_v)
    return att.w_o((weights @ v).transpose(1, 2).flatten(2))  # (B, T, D)
