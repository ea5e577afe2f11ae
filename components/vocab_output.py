"""The pre-softmax linear transformation over the vocabulary (§3.4), and the rows it never scores."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class VocabOutput(nn.Linear):
    """(…, D) -> (…, V) logits x·Wᵀ, no bias (W the token table where tied, §3.4). The ids in ``silent``
    (``model.silent_ids``) score -inf, so the softmax is over the other rows: an imported model's rows that its
    own output did not have compute what it computed."""

    def __init__(self, d_model: int, vocab_size: int, silent: Sequence[int] = ()) -> None:
        super().__init__(d_model, vocab_size, bias=False)
        self.silent = tuple(silent)
        mask = torch.zeros(vocab_size, dtype=torch.bool)
        mask[list(self.silent)] = True
        self.register_buffer("silent_mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.silence(super().forward(x))

    def silence(self, logits: torch.Tensor) -> torch.Tensor:
        """``logits`` (…, V) with the ``silent`` ids at -inf (the same tensor when there are none); a
        decoding copy of this layer with its own product (``engine/decoding/packed.py``) calls it too."""
        return logits.masked_fill(self.silent_mask, float("-inf")) if self.silent else logits


def silent_ids(model: nn.Module) -> tuple[int, ...]:
    """The ids ``model``'s output never scores (none for a model without a ``VocabOutput``)."""
    output = getattr(model, "output", None)
    return output.silent if isinstance(output, VocabOutput) else ()
