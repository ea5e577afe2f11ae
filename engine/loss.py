"""Label-smoothed cross entropy (§5.4) with the true NLL reported beside it."""

from __future__ import annotations

import torch


def label_smoothed_nll(
    logits: torch.Tensor, target: torch.Tensor, epsilon: float, pad: int
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """logits (B, T, V), target (B, T) -> (smoothed loss sum, NLL sum, non-pad token count).

    Label smoothing of Szegedy et al. (the paper's [30], §5.4): the target distribution is
    (1 - ε)·one_hot + ε/V, so loss = (1 - ε)·NLL + ε·mean_v(-log p_v). Padding is ignored.
    """
    lprobs = logits.float().log_softmax(-1)  # (B, T, V), float32 even under autocast
    keep = target.ne(pad)
    nll = -lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (B, T)
    uniform = -lprobs.mean(-1)  # (B, T): cross entropy against the uniform distribution
    nll_sum = nll[keep].sum()
    loss = (1.0 - epsilon) * nll_sum + epsilon * uniform[keep].sum()
    return loss, nll_sum, int(keep.sum())
