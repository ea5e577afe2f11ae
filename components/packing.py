"""Packed rows: several sequences side by side in one row of a batch, told apart by segment ids (1, 2, …
along a row; 0 at padding). Attention stays within a segment and positions count from 0 in each, so a
packed batch computes what the same sequences padded one to a row would (Krell et al. 2021, "Efficient
sequence packing without cross-contamination"); a fixed row length and row count give every batch the
same shape.

Legend: B rows, T query length, S key length.
"""

from __future__ import annotations

import torch


def segment_positions(segments: torch.Tensor) -> torch.Tensor:
    """(B, T) each token's position within its segment: 0 at the segment's first token (padding counts on
    from the row's last segment start; it is never attended by a real token)."""
    idx = torch.arange(segments.size(1), device=segments.device).expand_as(segments)
    starts = torch.ones_like(segments, dtype=torch.bool)
    starts[:, 1:] = segments[:, 1:] != segments[:, :-1]
    first = torch.where(starts, idx, torch.zeros_like(idx)).cummax(dim=1).values
    return idx - first


def blocked(queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """(B, 1, T, S) True where a query may not see a key: the key is in another segment. A padding query
    (segment 0) sees every key: its output carries no loss, and a row of the mask all blocked would make
    the softmax NaN (and NaN · 0 gradients stay NaN)."""
    other = queries[:, :, None] != keys[:, None, :]
    return (other & queries.ne(0)[:, :, None])[:, None]
