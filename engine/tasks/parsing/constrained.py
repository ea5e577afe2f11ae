"""Decoding only well-formed trees over exactly the input words (``data.dataset.well_formed``).

At every step each decoder row of a top-down sequence (``(S (NP XX )NP …)S``) may take:
- an opening bracket ``(X``, while words remain to be placed (the first token must be one: one root);
- a leaf (``XX``, or a tag with ``linearization: tags``), while words remain;
- the closing bracket of its innermost open constituent, once that constituent holds something (no
  empty constituents), and for the root only once every word is placed;
- EOS, once the root is closed.
Of an in-order sequence (``order: in_order``, Liu & Zhang 2017: ``XX (NP )NP (S …)S``):
- a leaf, while words remain, inside an open constituent or as the first token (one root: a second
  item at depth 0 could never be joined to the first);
- an opening bracket ``(X`` right after a completed item (a leaf or a closing bracket), which becomes
  X's first child, so no constituent is ever empty; also once every word is placed (unary constituents
  above the last word, the root of a one-word sentence ``XX (S )S``);
- the closing bracket of its innermost open constituent (it always holds its first child);
- EOS at depth 0 once every word is placed and the last token closed a constituent (the root).
Of a lexicalized sequence (``linearization: words``, ``(S (NP Ms. Haag )NP …)S``, words in the source's
subword pieces, ``lexical.py``) the same moves in either order, with a leaf being one piece: the only leaf
a row may place is the next piece of the source's words, and nothing else until the word it begins is
whole (no bracket inside a word); the counts below are then pieces, not words.
Each only while the length limit leaves room to finish the tree after it (a leaf per word still to
place, a closing bracket per open one, in order an opening and a closing one for a tree to be put back
together at depth 0, EOS). So every finished output is a tree over exactly the input words, unless the
limit is too short for even the flattest tree (then ``repair`` still mends it). Nothing else is
generated (no word pieces). The state (leaves placed, open brackets, the last token) is recomputed from
each row's history, so it follows the beams for free.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ...data.tokenizer import Tokenizer
from .lexical import USER_DEFINED, flat_pieces, leaf_pieces

NEG_INF = float("-inf")


@dataclass(frozen=True)
class TreeVocab:
    """Which ids are opening brackets, closing brackets and leaves, and each opening bracket's closer."""

    is_open: torch.Tensor  # (V,) bool
    is_close: torch.Tensor  # (V,) bool
    is_leaf: torch.Tensor  # (V,) bool
    closer: torch.Tensor  # (V,) long: the id of ")X" for "(X", else -1
    start: int  # the decoder's start id (the last token before the first), of no class
    stop: int  # EOS

    @classmethod
    def of(cls, tok: Tokenizer, style: str) -> TreeVocab:
        """From the tokenizer's whole target pieces (``▁(X``, ``▁)X``, ``▁XX`` or ``▁TAG``); style words:
        every piece but the brackets and the special ids text leaves out (pad, bos, eos) is a leaf (a piece of
        a word)."""
        from sentencepiece import sentencepiece_model_pb2 as pb

        proto = pb.ModelProto()
        proto.ParseFromString(tok.sp.serialized_model_proto())
        size = len(proto.pieces)
        is_open, is_close, is_leaf = (torch.zeros(size, dtype=torch.bool) for _ in range(3))
        closer = torch.full((size,), -1, dtype=torch.long)
        ids = {p.piece: i for i, p in enumerate(proto.pieces)}
        for i, p in enumerate(proto.pieces):
            if p.type != USER_DEFINED:
                continue
            text = p.piece.removeprefix("\u2581")
            if text.startswith("(") and len(text) > 1:
                is_open[i] = True
                closer[i] = ids.get(p.piece.replace("(", ")", 1), -1)
            elif text.startswith(")") and len(text) > 1:
                is_close[i] = True
            elif style == "tags" or text == "XX":
                is_leaf[i] = True
        if style == "words":
            is_leaf = ~(is_open | is_close)
            is_leaf[sorted(tok.special.skipped)] = False
        return cls(is_open, is_close, is_leaf, closer, tok.special.start, tok.special.stop)

    def to(self, device: torch.device | str) -> TreeVocab:
        tensors = (t.to(device) for t in (self.is_open, self.is_close, self.is_leaf, self.closer))
        return TreeVocab(*tensors, self.start, self.stop)


@dataclass(frozen=True)
class _State:
    """Where each of N rows stands after its history of t tokens."""

    t: int
    last: torch.Tensor  # (N,) the last token (the start before the first)
    todo: torch.Tensor  # (N,) words still to place
    depth: torch.Tensor  # (N,) constituents open
    top: torch.Tensor  # (N,) the innermost open constituent's opening bracket (meaningless at depth 0)
    last_open: torch.Tensor  # (N,) bool: the last token opened a constituent (True before the first)
    room: torch.Tensor  # (N,) slots after this token, EOS included (|Y| <= limit)
    mid: torch.Tensor  # (N,) bool: style words, inside a word (its next piece is the only move)
    next_leaf: torch.Tensor | None  # (N,) style words: the next piece of the source's words (else any leaf)

    @property
    def left(self) -> torch.Tensor:
        return self.todo.gt(0)


class WellFormed:
    """The search's step rule (``search.Rules.step_rule``) for sentences of ``words`` (B,) words each,
    their trees written in ``order`` (``data.dataset.order``). Lexicalized (style words): ``pieces``, the
    (B, L + 1) pieces of each sentence's words and (B, L + 1) whether each begins a word
    (``lexical.flat_pieces``), and ``words`` counts pieces."""

    def __init__(self, vocab: TreeVocab, words: torch.Tensor, order: str = "top_down",
                 pieces: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        self.vocab, self.words, self.order, self.pieces = vocab, words, order, pieces
        self.classes = _Classes.of(vocab)

    def ban(self, lprobs: torch.Tensor, history: torch.Tensor, sent: torch.Tensor, rows: int,
            limit: torch.Tensor | None = None) -> None:
        """In place on (N, V): -inf for every token that would not keep the output a tree prefix. A row
        left with nothing (the length limit forcing EOS into an unfinished tree) keeps EOS."""
        state = self._state(history, sent, rows, limit)
        moves = (_in_order if self.order == "in_order" else _top_down)(self.vocab, state)
        _keep_moves(lprobs, self.classes, moves)

    def _state(self, history: torch.Tensor, sent: torch.Tensor, rows: int, limit: torch.Tensor | None) -> _State:
        v = self.vocab
        n, t = history.shape
        words = self.words[sent].repeat_interleave(rows)  # (N,)
        opens, closes = v.is_open[history], v.is_close[history]  # (N, t)
        placed = v.is_leaf[history].sum(1)
        depth_after = (opens.long() - closes.long()).cumsum(1)  # (N, t)
        depth = depth_after[:, -1] if t else torch.zeros(n, dtype=torch.long, device=history.device)
        # the innermost open bracket: the last opening one whose depth is still the current depth
        innermost = opens & depth_after.eq(depth[:, None])
        position = (innermost * torch.arange(1, t + 1, device=history.device)).argmax(1) if t else depth
        top = history.gather(1, position[:, None]).squeeze(1) if t else depth
        last = history[:, -1] if t else torch.full_like(depth, v.start)
        last_open = opens[:, -1] if t else torch.ones(n, dtype=torch.bool, device=history.device)
        # slots after this token (EOS included in |Y| <= limit); enough to finish the tree after it?
        room = (limit.repeat_interleave(rows) - t - 1) if limit is not None else torch.full_like(words, 1 << 30)
        mid, next_leaf = torch.zeros_like(depth, dtype=torch.bool), None
        if self.pieces is not None:  # the next piece of the row's sentence, and whether it continues a word
            ids, start = self.pieces
            row, k = sent.repeat_interleave(rows), placed.clamp(max=ids.size(1) - 1)
            next_leaf, mid = ids[row, k], ~start[row, k]
        return _State(t, last, words - placed, depth, top, last_open, room, mid, next_leaf)


@dataclass(frozen=True)
class _Moves:
    """What each of N rows may take next: every opening bracket, every leaf token (or, style words, only
    the next source piece), its innermost closing bracket, EOS; each (N,) bool."""

    open: torch.Tensor
    leaf: torch.Tensor
    close: torch.Tensor
    eos: torch.Tensor
    close_id: torch.Tensor  # (N,) the closing bracket's id (PAD where the opening bracket has none)
    leaf_id: torch.Tensor | None  # (N,) style words: the one leaf a row may place; else None (any leaf)


def _moves(v: TreeVocab, s: _State, can_open: torch.Tensor, can_place: torch.Tensor, can_close: torch.Tensor,
           can_end: torch.Tensor) -> _Moves:
    return _Moves(can_open, can_place, can_close, can_end, v.closer[s.top].clamp(min=0), s.next_leaf)


@dataclass(frozen=True)
class _Classes:
    """A vocabulary's tables for ``_keep_moves``: (4, V) bool, what a row whose code is 2·(may open) +
    (may place any leaf) leaves banned (EOS always: it is set alone); the opening brackets' and the
    leaves' ids."""

    bans: torch.Tensor
    open_ids: torch.Tensor
    leaf_ids: torch.Tensor
    stop: int  # EOS

    @classmethod
    def of(cls, v: TreeVocab) -> _Classes:
        pick = torch.tensor([[False, False], [False, True], [True, False], [True, True]], device=v.is_open.device)
        bans = ~((pick[:, :1] & v.is_open) | (pick[:, 1:] & v.is_leaf))
        bans[:, v.stop] = True
        return cls(bans, v.is_open.nonzero().squeeze(1), v.is_leaf.nonzero().squeeze(1), v.stop)


def _keep_moves(lprobs: torch.Tensor, c: _Classes, m: _Moves) -> None:
    """-inf, in place on (N, V), everywhere but each row's moves (the row's values kept there); a row whose
    moves are all -inf keeps its EOS. Two passes over (N, V) (a row of the class table per row, one
    fill); the single tokens (closing bracket, next piece, EOS) are put back one value per row, and
    whether anything is left is read from the values kept, not from a pass over (N, V)."""
    eos = lprobs[:, c.stop].clone()
    singles = [(m.close_id, m.close)] + ([] if m.leaf_id is None else [(m.leaf_id, m.leaf)])
    saved = [lprobs.gather(1, index[:, None]).squeeze(1) for index, _ in singles]
    any_leaf = m.leaf if m.leaf_id is None else torch.zeros_like(m.leaf)
    lprobs.masked_fill_(c.bans.index_select(0, m.open.long() * 2 + any_leaf.long()), NEG_INF)
    alive = m.eos & eos.isfinite()
    for (index, allowed), value in zip(singles, saved, strict=True):  # in turn: a token either allows stays
        now = lprobs.gather(1, index[:, None]).squeeze(1)
        lprobs.scatter_(1, index[:, None], torch.where(allowed, value, now)[:, None])
        alive |= allowed & value.isfinite() & index.ne(c.stop)  # EOS is set alone, below
    for allowed, ids in ((m.open, c.open_ids), (any_leaf, c.leaf_ids)):
        if ids.numel():  # the class's columns, kept where allowed: any of them finite
            alive |= allowed & lprobs.index_select(1, ids).isfinite().any(1)
    lprobs[:, c.stop] = torch.where(m.eos | ~alive, eos, torch.full_like(eos, NEG_INF))


def _top_down(v: TreeVocab, s: _State) -> _Moves:
    """The moves of a top-down sequence (Vinyals & Kaiser et al. 2014)."""
    todo, depth, room, left, whole = s.todo, s.depth, s.room, s.left, ~s.mid
    started = depth.gt(0)
    rooted = s.t > 0  # the root has been opened (and, at depth 0, closed again)
    can_open = left & whole & (started | (not rooted)) & (todo + depth + 2 <= room)
    can_place = left & started & (todo - 1 + depth + 1 <= room)
    can_close = started & whole & ~s.last_open & (depth.gt(1) | ~left) & (todo + depth <= room)
    can_end = (depth.eq(0) & ~left) if rooted else torch.zeros_like(left)
    return _moves(v, s, can_open, can_place, can_close, can_end)


def _in_order(v: TreeVocab, s: _State) -> _Moves:
    """The moves of an in-order sequence (Liu & Zhang 2017): ``(X`` after its first child."""
    todo, depth, room, left, whole = s.todo, s.depth, s.room, s.left, ~s.mid
    started = depth.gt(0)
    after_item = (v.is_leaf | v.is_close)[s.last] & whole  # the last token completed an item: a first child
    # after an opening: the leaves, a closing bracket per open one (this one too), EOS
    can_open = after_item & (todo + depth + 2 <= room)
    # after a leaf inside: the other leaves, the closing brackets, EOS; as the first token: an opening
    # bracket, the other leaves, its closing bracket, EOS
    need = torch.where(started, todo - 1 + depth + 1, todo - 1 + 3)
    can_place = left & (started | (s.t == 0) | s.mid) & (need <= room)
    # after a closing one: the leaves, the closing brackets still open, EOS; back at depth 0 with words
    # left, the tree so far must become a first child again: an opening and a closing bracket more
    need = todo + depth - 1 + 1 + torch.where(depth.eq(1) & left, 2, 0)
    can_close = started & whole & (need <= room)
    can_end = depth.eq(0) & ~left & v.is_close[s.last] & (s.t > 0)
    return _moves(v, s, can_open, can_place, can_close, can_end)


def tree_rule(tok: Tokenizer, style: str, lines: list[str], device: torch.device | str, order: str = "top_down",
              ) -> Callable[[list[int]], WellFormed]:
    """For ``translate(step_rule=...)``: the rule for a batch of ``lines``' indices, trees in ``order``
    (style words: each line's pieces, set up once here)."""
    vocab = TreeVocab.of(tok, style).to(device)
    if style != "words":
        words = torch.tensor(word_counts(lines), dtype=torch.long, device=device)
        return lambda rows: WellFormed(vocab, words[torch.tensor(rows, dtype=torch.long, device=device)], order)
    ids, start, slots = flat_pieces(leaf_pieces(tok, lines), device, tok.special.fill)

    def rule(rows: list[int]) -> WellFormed:
        index = torch.tensor(rows, dtype=torch.long, device=device)
        return WellFormed(vocab, slots[index], order, (ids[index], start[index]))

    return rule


def word_counts(lines: list[str]) -> list[int]:
    """Words per source line (the treebank's sources are space-separated words)."""
    return [len(line.split()) for line in lines]
