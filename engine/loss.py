"""Label-smoothed cross entropy (§5.4) with the true NLL beside it, a training batch's loss (with R-Drop's
consistency term), and the teacher-forced loss and perplexity of a set of pairs (validation during training,
perplexity in evaluation). A task's ``loss`` and ``valid_loss`` (``tasks/base.py``) call these by default."""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from tbuild.components.specs.special import Specials

from .data.batches import BatchSource, collate, token_batches
from .device.policy import Policy


def _wide(t: torch.Tensor) -> torch.dtype:
    return torch.promote_types(t.dtype, torch.float32)  # bf16/fp16 -> fp32; fp32/fp64 unchanged


CHUNK_ELEMENTS = 1 << 24  # logits upcast to fp32 at a time (64 MB), whatever the batch and vocabulary


def _chunks(rows: int, vocab: int) -> list[slice]:
    """Row ranges of at most CHUNK_ELEMENTS logits (at least one row each)."""
    step = max(1, CHUNK_ELEMENTS // max(vocab, 1))
    return [slice(start, min(start + step, rows)) for start in range(0, rows, step)]


class _SmoothedNLL(torch.autograd.Function):
    """Fused loss over (N, V) logits: one log-sum-exp forward, and the gradient softmax - q written
    directly in backward, instead of materialising log-probabilities and back-propagating through
    log_softmax, gather and mean (a large share of a CPU training step: docs/benchmarks.md).
    Rows go through in chunks of at most ``CHUNK_ELEMENTS`` logits, so bf16 logits are never upcast
    to fp32 whole (25,000 target tokens × 37,000 pieces would be 3.7 GB); a Multi30k batch is one chunk."""

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, target: torch.Tensor, keep: torch.Tensor,
                epsilon: float) -> tuple[torch.Tensor, torch.Tensor]:
        wide = _wide(logits)
        keep_f = keep.to(wide)
        lse = torch.empty(logits.size(0), dtype=wide, device=logits.device)  # (N,)
        loss = nll_sum = torch.zeros((), dtype=wide, device=logits.device)
        for rows in _chunks(*logits.shape):
            x = logits[rows].to(wide)
            lse[rows] = torch.logsumexp(x, -1)
            nll = lse[rows] - x.gather(-1, target[rows, None]).squeeze(-1)  # -log p(target)
            uniform = lse[rows] - x.sum(-1) / x.size(-1)  # cross entropy against the uniform: mean_v(-log p_v)
            loss = loss + ((1.0 - epsilon) * nll + epsilon * uniform).mul(keep_f[rows]).sum()
            nll_sum = nll_sum + nll.mul(keep_f[rows]).sum()
        ctx.save_for_backward(logits, lse, target, keep_f)
        ctx.epsilon = epsilon
        ctx.mark_non_differentiable(nll_sum)
        return loss, nll_sum

    @staticmethod
    def backward(ctx: Any, grad_loss: torch.Tensor, _grad_nll: torch.Tensor) -> tuple[Any, ...]:
        logits, lse, target, keep_f = ctx.saved_tensors
        eps = ctx.epsilon
        grad = torch.empty_like(logits)
        for rows in _chunks(*logits.shape):
            # d loss / d logits = softmax(logits) - q, with q = (1-ε)·one_hot(target) + ε/V
            g = (logits[rows].to(lse.dtype) - lse[rows, None]).exp_().sub_(eps / logits.size(-1))
            g.scatter_add_(-1, target[rows, None], torch.full_like(lse[rows, None], -(1.0 - eps)))
            grad[rows] = g.mul_((keep_f[rows] * grad_loss)[:, None])
        return grad, None, None, None


def label_smoothed_nll(logits: torch.Tensor, target: torch.Tensor, epsilon: float,
                       offset: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """logits (B, T, V), target (B, T) -> (smoothed loss sum, NLL sum, scored token count), all 0-d tensors on
    the logits' device: none is read on the host, so a training step never waits for the GPU. The target holds
    class c as c + ``offset`` (a tagger's labels, stored above NO_LABEL: ``data/word_labels.py``); a position
    below ``offset`` (``batches.IGNORED`` past a row's length, a tagger's NO_LABEL) carries no loss.

    Label smoothing of Szegedy et al. (the paper's [30], §5.4): the target distribution is
    (1 - ε)·one_hot + ε/V, so loss = (1 - ε)·NLL + ε·mean_v(-log p_v). Computed in float32 even under
    autocast; the NLL sum carries no gradient.
    """
    keep = target.ge(offset)
    target = (target - offset).clamp(min=0)  # the positions left out read class 0, masked out by keep
    loss, nll_sum = _SmoothedNLL.apply(logits.flatten(0, -2), target.flatten(), keep.flatten(), epsilon)
    return loss, nll_sum, keep.sum()


def rdrop_kl(first: torch.Tensor, second: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """R-Drop's consistency term (Liang et al. 2021, eq. 2): ½(KL(P₁‖P₂) + KL(P₂‖P₁)) summed over the target
    positions ``keep`` (B, T) holds, for two passes' logits (B, T, V) of the same batch; in float32."""
    a, b = (F.log_softmax(x.float(), dim=-1) for x in (first, second))
    pa, pb = a.exp(), b.exp()  # a row no pass scores (logit -inf in both) adds 0, not NaN
    kl = (torch.where(pa > 0, pa * (a - b), 0.0) + torch.where(pb > 0, pb * (b - a), 0.0)).sum(-1)
    return 0.5 * kl.masked_fill(~keep, 0.0).sum()


def batch_loss(model: nn.Module, tensors: Sequence[torch.Tensor], *, label_smoothing: float, rdrop: float,
               policy: Policy, offset: int = 0, precision: AbstractContextManager | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """A training batch's label-smoothed loss sum and NLL sum (0-d tensors; ``tensors``: src, tgt_in, tgt_out and
    the source's padding mask or packed rows' segment ids, as ``collate`` gives them; ``offset``: see
    ``label_smoothed_nll``). With ``rdrop`` α > 0 (R-Drop, Liang et al. 2021, eq. 3) the batch goes through twice
    (as one batch of both copies: two dropout masks) and the loss is the two passes' mean plus α/2 times their
    symmetric KL (``rdrop_kl``), as fairseq's R-Drop criterion computes it. ``precision``: an autocast other than
    the policy's (the precision check's timed passes)."""
    src, tgt_in, tgt_out, *padding = tensors
    twice = rdrop > 0
    if twice:
        src, tgt_in, tgt_out = (torch.cat([t, t]) for t in (src, tgt_in, tgt_out))
        padding = [torch.cat([s, s]) for s in padding]
    with precision or policy.autocast(), policy.attention():
        logits = model(src, tgt_in, *padding)
    loss, nll, _ = label_smoothed_nll(logits, tgt_out, label_smoothing, offset)
    if not twice:
        return loss, nll
    half = src.size(0) // 2
    kl = rdrop_kl(logits[:half], logits[half:], tgt_out[:half].ge(offset))
    return loss / 2 + rdrop / 2 * kl, nll / 2


@torch.no_grad()
def evaluate_loss(model: nn.Module, pairs: BatchSource, *, batch_tokens: int, label_smoothing: float,
                  policy: Policy, special: Specials, offset: int = 0) -> dict[str, float]:
    """Label-smoothed loss, NLL and perplexity per target token of ``pairs``, teacher-forced, in eval mode
    (``special``: the vocabulary's ids the batches start and pad with). ``offset`` (a tagger's labels, see
    ``label_smoothed_nll``): the accuracy of the best class too."""
    model.eval()
    loss_sum = nll_sum = 0.0
    ntokens = correct = 0
    batches = token_batches(pairs.src_lengths, pairs.tgt_lengths, batch_tokens,
                            seed=0, epoch=0, shuffle=False)
    for batch in batches:
        src, tgt_in, tgt_out, src_pad = (policy.to_device(t) for t in collate(pairs, batch, special))
        with policy.autocast(), policy.attention():
            logits = model(src, tgt_in, src_pad)
        loss, nll, n = label_smoothed_nll(logits, tgt_out, label_smoothing, offset)
        loss_sum, nll_sum, ntokens = loss_sum + loss.item(), nll_sum + nll.item(), ntokens + int(n)
        if offset:
            correct += int((logits.argmax(-1).eq(tgt_out - offset) & tgt_out.ge(offset)).sum())
    n = max(ntokens, 1)
    result = {"loss": loss_sum / n, "nll": nll_sum / n, "ppl": math.exp(min(nll_sum / n, 50.0)), "tokens": ntokens}
    return result | ({"accuracy": correct / n} if offset else {})
