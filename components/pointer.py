"""The decoder's pointer into the source (``model.decoder.pointer``; specs in ``specs/pointer.py``).

Legend: M memory rows (sentences), B = M·beams decoder rows, S source length, T target positions,
D d_model, U source units (words or pieces) of a row.

A pointer counts, at each target position t, the ``advance`` tokens among the tokens fed before t:
p_t = Σ_{j ≤ t} advance(tgt_j) over the shifted-right input (BOS first, never an advance token), so
p_t is the number of source units the output has consumed and the unit it stands at next. Unit p of a
source row is the position of its p-th word's first piece (``source: words``) or its p-th piece
(``pieces``); from the row's last unit on it is the row's EOS position. Teacher-forced, p is one
cumulative sum; an incremental decoder keeps each row's count in its cache (``DecoderCache.pointer``),
reordered with the beams, and adds the new positions' sum to it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .registry import POINTER
from .specs.pointer import NextWordSpec, PointerSpecBase, parse_ids


@dataclass
class PointedMemory:
    """An encoder output with where each of its rows' source units sits: what ``encode`` returns for a
    model with a pointer. ``index_select`` keeps rows, as a tensor memory's does, so a search that only
    hands memory back and selects its rows (``engine/decoding/model.py``) needs nothing else."""

    states: torch.Tensor  # (M, S, D) the encoder output
    units: torch.Tensor  # (M, S + 1) long: the source position of unit 0, 1, …; the EOS position past the last

    def index_select(self, dim: int, index: torch.Tensor) -> PointedMemory:
        assert dim == 0, "memory rows are selected along dim 0"
        return PointedMemory(self.states.index_select(0, index), self.units.index_select(0, index))


def _mask(ids: str | None, size: int) -> torch.Tensor | None:
    """(size,) bool: True at the ids of a ranges string (ids past ``size`` ignored); None for None."""
    if ids is None:
        return None
    mask = torch.zeros(size, dtype=torch.bool)
    index = torch.tensor([i for i in parse_ids(ids) if i < size], dtype=torch.long)
    mask[index] = True
    return mask


class Pointer(nn.Module):
    """The shared part of every pointer kind: the masks of the spec's resolved id sets (buffers that are
    not saved: the spec holds them) and the pointer's source positions."""

    def __init__(self, spec: PointerSpecBase, vocab_size: int, src_vocab_size: int) -> None:
        super().__init__()
        self.source = spec.source
        advance, units = _mask(spec.advance_ids, vocab_size), _mask(spec.unit_ids, src_vocab_size)
        self.resolved = advance is not None and (spec.source == "pieces" or units is not None)
        self.register_buffer("advance", advance if advance is not None else torch.zeros(vocab_size, dtype=torch.bool),
                             persistent=False)
        self.register_buffer("starts", units if units is not None else torch.zeros(src_vocab_size, dtype=torch.bool),
                             persistent=False)

    def _need(self) -> None:
        if not self.resolved:
            raise RuntimeError("model.decoder.pointer's id sets are not resolved: fit the spec to its tokenizer "
                               "first (tbuild train does), or give advance_ids (and unit_ids for source words)")

    def units(self, src: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        """(M, S + 1) long: each source row's unit positions in order, then its EOS position (the last
        non-PAD one) to the end."""
        self._need()
        m, s = src.shape
        position = torch.arange(s, device=src.device).expand(m, s)
        eos = (~pad).sum(1, keepdim=True) - 1  # (M, 1): sources end with EOS
        is_unit = ~pad & position.lt(eos) & (self.starts[src] if self.source == "words" else True)
        # units first, in order (a stable sort of "not a unit"), then anything: replaced by EOS
        order = (~is_unit).to(torch.uint8).argsort(dim=1, stable=True)
        count = is_unit.sum(1, keepdim=True)
        units = torch.where(position.lt(count), order, eos)
        return torch.cat([units, eos], 1)

    def counts(self, tgt: torch.Tensor, before: torch.Tensor | None) -> torch.Tensor:
        """(B, T) p_t of the fed tokens ``tgt`` (B, T): the advance tokens up to each, plus ``before`` (B,),
        the count of the positions fed earlier (an incremental decoder's cache)."""
        self._need()
        p = self.advance[tgt].long().cumsum(1)
        return p if before is None else p + before[:, None]

    @staticmethod
    def gather(memory: PointedMemory, p: torch.Tensor, beams: int) -> torch.Tensor:
        """(B, T, D) the encoder output at each position's unit p (B, T); row r of p belongs to memory row
        r // beams (beams consecutive rows share a sentence, as in ``decode``)."""
        states, units = memory.states, memory.units
        m, s, d = states.shape
        rows = torch.arange(p.size(0), device=p.device).div(beams, rounding_mode="floor")  # (B,)
        position = units[rows[:, None], p.clamp(max=s)]  # (B, T)
        return states.reshape(m * s, d)[rows[:, None] * s + position]


@POINTER.register(NextWordSpec)
class NextWord(Pointer):
    """The encoder output at the next source unit, projected, added to the decoder's input embedding
    (Ma et al. 2017's deterministic attention; Liu et al. 2018): x_t += W · h_{unit(p_t)}."""

    def __init__(self, spec: NextWordSpec, *, d_model: int, vocab_size: int, src_vocab_size: int) -> None:
        super().__init__(spec, vocab_size, src_vocab_size)
        self.proj = nn.Linear(d_model, d_model, bias=spec.bias)

    def forward(self, memory: PointedMemory, p: torch.Tensor, beams: int = 1) -> torch.Tensor:
        """(B, T, D) what the decoder's input embedding gets added at each position."""
        return self.proj(self.gather(memory, p, beams))
