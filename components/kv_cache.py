"""Self-attention keys/values of incremental decoding, kept position-major in a growing buffer.

Legend: B rows (hypotheses), W ≥ B physical rows of the buffer, Hkv key/value heads, T new positions,
L positions kept, d per-head size.

Beam search reorders the rows after every step. Kept as (B, Hkv, L, d) tensors, each step copies
them twice (``torch.cat`` of the new position, then ``index_select`` of the surviving rows). Here
they live in a (capacity, W, Hkv, d) buffer: a step writes its position in place, and a reorder
copies only the histories that must be duplicated.

A reorder's new row i continues old row index[i] (its parent). Logical row i lives at physical row
``rows[i]`` (None: at row i). The first new row of each parent keeps the parent's physical row, as it
is (no copy: the histories are equal); only a parent's second, third… child (a fork) and a child whose
parent lies past the new row count take a free row (a row no child kept: a parent that died, or a
finished sentence's) and get the parent's L positions copied there. So a reorder costs the forks'
histories, not every row's: none at all where each row continues itself (beam 1 and sampling after
their first step, a beam whose hypotheses keep their ranks). Attention works in physical order (the
queries are permuted to it and the outputs back, (B, H, T, d) each, ``attention.py``); row for row it is
the same computation, so the outputs are identical (tests/components/test_kv_cache.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

GROW = 32  # positions added to the buffers when they are full


@dataclass(frozen=True)
class Move:
    """One reorder of a buffer's rows: the new row map and the histories to copy (``KVBuffer.plan``)."""

    count: int  # B': logical rows after the reorder
    rows: torch.Tensor | None  # (B',) physical row of each new logical row; None: row i at i
    source: torch.Tensor  # (F,) physical rows whose histories are copied …
    target: torch.Tensor  # (F,) … to these (free) physical rows
    width: int  # the physical width W it was made for
    basis: torch.Tensor | None  # the row map it was made from (a plan serves only buffers that have it)


def plan_move(rows: torch.Tensor | None, index: torch.Tensor, width: int) -> Move:
    """The reorder keeping logical rows ``index`` (B',) of a buffer whose logical rows sit at physical
    ``rows`` (None: in order), W = ``width`` physical rows (module docstring)."""
    count = index.numel()
    parent = index if rows is None else rows.index_select(0, index)  # (B',) physical row of each parent
    new = torch.arange(count, device=index.device)
    first = torch.full((max(width, count),), count, dtype=torch.long, device=index.device)
    first.scatter_reduce_(0, parent, new, "amin")  # the first child of each parent
    keep = first.index_select(0, parent).eq(new) & parent.lt(count)
    taken = torch.zeros(count, dtype=torch.bool, device=index.device)
    taken[parent[keep]] = True
    movers, free = (~keep).nonzero().squeeze(1), (~taken).nonzero().squeeze(1)  # as many of each
    placed = parent.index_put((movers,), free)
    in_order = bool(placed.eq(new).all())
    return Move(count, None if in_order else placed, parent.index_select(0, movers), free, width, rows)


class KVBuffer:
    """Keys and values of the positions decoded so far; ``append`` returns all of them as
    (B, Hkv, L, d) views in physical row order (strided: no copy), ``keys``/``values`` in logical order;
    ``reorder`` keeps and reorders rows."""

    def __init__(self) -> None:
        self.k: torch.Tensor | None = None  # (capacity, W, Hkv, d_k)
        self.v: torch.Tensor | None = None  # (capacity, W, Hkv, d_v)
        self.length = 0
        self.count = 0  # B: logical rows, at physical rows 0..B-1
        self.rows: torch.Tensor | None = None  # (B,) physical row of each logical row; None: in order
        self.inverse: torch.Tensor | None = None  # (B,) logical row at each physical row; None: in order

    @property
    def keys(self) -> torch.Tensor:
        """(B, Hkv, L, d_k): the keys kept, in logical order (a view when the rows are in order)."""
        assert self.k is not None, "nothing appended yet"
        return self._logical(self.k)

    @property
    def values(self) -> torch.Tensor:
        """(B, Hkv, L, d_v): the values kept, in logical order."""
        assert self.v is not None, "nothing appended yet"
        return self._logical(self.v)

    def _physical(self, buf: torch.Tensor) -> torch.Tensor:
        return buf[: self.length, : self.count].permute(1, 2, 0, 3)

    def _logical(self, buf: torch.Tensor) -> torch.Tensor:
        view = self._physical(buf)
        return view if self.rows is None else view.index_select(0, self.rows)

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """k (B, Hkv, T, d_k), v (B, Hkv, T, d_v) of the new positions, rows in logical order -> every
        position's (B, Hkv, L+T, ·), rows in physical order (``inverse``: which logical row each is)."""
        end = self.length + k.size(2)
        if self.k is None or end > self.k.size(0) or self.count != k.size(0):
            self._grow(k, v, end + GROW)
        assert self.k is not None and self.v is not None
        new_k, new_v = k.permute(2, 0, 1, 3), v.permute(2, 0, 1, 3)  # (T, B, Hkv, d)
        if self.rows is None:
            self.k[self.length:end, : self.count] = new_k
            self.v[self.length:end, : self.count] = new_v
        else:
            self.k[self.length:end].index_copy_(1, self.rows, new_k)
            self.v[self.length:end].index_copy_(1, self.rows, new_v)
        self.length = end
        return self._physical(self.k), self._physical(self.v)

    def plan(self, index: torch.Tensor) -> Move:
        """The reorder keeping logical rows ``index`` (B',) in that order (``apply`` carries it out; the
        same plan serves every buffer with the same rows, width and count: a decoder's layers)."""
        return plan_move(self.rows, index, 0 if self.k is None else self.k.size(1))

    def reorder(self, index: torch.Tensor, move: Move | None = None) -> Move | None:
        """Keep logical rows ``index`` (B',) in that order. ``move``: another buffer's plan for the same
        index (a decoder's layers share one), used where it fits this buffer. Returns the plan used
        (None where every row was copied)."""
        if self.k is None or self.v is None:
            return None
        if self.k.requires_grad or self.v.requires_grad or index.numel() > self.k.size(1):
            self._copy_all(index)
            return None
        if move is None or move.basis is not self.rows or move.width != self.k.size(1):
            move = self.plan(index)
        if move.source.numel():
            filled = self.length
            for buf in (self.k, self.v):
                buf[:filled].index_copy_(1, move.target, buf[:filled].index_select(1, move.source))
        self._set_rows(move.rows, move.count)
        return move

    def _copy_all(self, index: torch.Tensor) -> None:
        """Every kept row copied into a new buffer, in logical order: under autograd (``out=`` copies are
        not differentiable), or for more rows than the buffer holds (a beam's first step)."""
        assert self.k is not None and self.v is not None
        whole = index if self.rows is None else self.rows.index_select(0, index)
        if self.k.requires_grad or self.v.requires_grad:
            self.k, self.v = self.k.index_select(1, whole), self.v.index_select(1, whole)
        else:
            filled, n = self.length, index.numel()
            k, v = (buf.new_empty(buf.size(0), n, *buf.shape[2:]) for buf in (self.k, self.v))
            torch.index_select(self.k[:filled], 1, whole, out=k[:filled])  # contiguous slices: no copy back
            torch.index_select(self.v[:filled], 1, whole, out=v[:filled])
            self.k, self.v = k, v
        self._set_rows(None, index.numel())

    def _set_rows(self, rows: torch.Tensor | None, count: int) -> None:
        self.rows, self.count = rows, count
        self.inverse = None if rows is None else torch.empty_like(rows).index_put_(
            (rows,), torch.arange(count, device=rows.device))

    def _grow(self, k: torch.Tensor, v: torch.Tensor, capacity: int) -> None:
        (b, h, _, d_k), d_v = k.shape, v.size(3)
        if self.k is not None and self.count != b:
            raise ValueError(f"{b} rows appended to a cache of {self.count}")
        capacity = max(capacity, 0 if self.k is None else self.k.size(0))
        new_k, new_v = k.new_empty(capacity, b, h, d_k), v.new_empty(capacity, b, h, d_v)
        if self.k is not None and self.v is not None:
            new_k[: self.length], new_v[: self.length] = self.k[: self.length, :b], self.v[: self.length, :b]
        else:
            self.count = b
        self.k, self.v = new_k, new_v
