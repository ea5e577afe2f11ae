"""A prefix LM's pairs with loss on both sides (``model.prefix_lm.loss: both``): each pair's target
becomes its source (ending with EOS, the separator) followed by its target, so the teacher-forced
input is BOS, source, separator, target and every next token (source pieces, separator, target
pieces, EOS) carries loss. The source side stays as it is: the model reads each row's prefix length
from it (``components/decoder_only.py``)."""

from __future__ import annotations

import numpy as np

from tbuild.builder.spec import Spec

from .batches import BatchSource


class JoinedPairs:
    """``source``'s pairs with each target preceded by its source (a ``BatchSource``)."""

    def __init__(self, source: BatchSource) -> None:
        self.source = source

    def __len__(self) -> int:
        return len(self.source)

    @property
    def variants(self) -> tuple[int, ...]:
        """The source's sampled variants (``batches.epoch_rows``)."""
        return getattr(self.source, "variants", ())

    @property
    def src_lengths(self) -> np.ndarray:
        return self.source.src_lengths

    @property
    def tgt_lengths(self) -> np.ndarray:
        return self.source.src_lengths + self.source.tgt_lengths

    def padded(self, indices: np.ndarray, side: str, pad: int) -> np.ndarray:
        """(B, longest) ids of ``side``: the source as it is, or source then target, right-padded."""
        if side == "src":
            return self.source.padded(indices, "src", pad)
        src, tgt = self.source.padded(indices, "src", pad), self.source.padded(indices, "tgt", pad)
        n_src, n_tgt = self.source.src_lengths[indices], self.source.tgt_lengths[indices]
        out = np.full((len(indices), int((n_src + n_tgt).max(initial=0))), pad, dtype=np.int64)
        for r, (a, b) in enumerate(zip(n_src.tolist(), n_tgt.tolist(), strict=True)):
            out[r, :a], out[r, a:a + b] = src[r, :a], tgt[r, :b]
        return out


def for_model(spec: Spec, pairs: BatchSource) -> BatchSource:
    """The pairs as the spec's model trains on them: joined for a prefix LM with loss on both sides,
    else as they are."""
    return JoinedPairs(pairs) if spec.model.scores_source else pairs
