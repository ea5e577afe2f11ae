"""Decoding only well-formed trees over exactly the input words (``data.dataset.well_formed``).

At every step each decoder row may take:
- an opening bracket ``(X``, while words remain to be placed (the first token must be one: one root);
- a leaf (``XX``, or a tag with ``linearization: tags``), while words remain;
- the closing bracket of its innermost open constituent, once that constituent holds something (no
  empty constituents), and for the root only once every word is placed;
- EOS, once the root is closed;
and each only while the length limit leaves room to finish the tree after it (a leaf per word still
to place, a closing bracket per open one, EOS). So every finished output is a tree over exactly the
input words, unless the limit is too short for even the flattest tree (then ``repair`` still mends
it). Nothing else is generated (no word pieces). The state (leaves placed, open brackets) is
recomputed from each row's history, so it follows the beams for free.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from tbuild.builder.tokens import EOS

from ..data.tokenizer import Tokenizer

NEG_INF = float("-inf")
USER_DEFINED = 4  # sentencepiece's ModelProto.SentencePiece.Type.USER_DEFINED: the whole target tokens


@dataclass(frozen=True)
class TreeVocab:
    """Which ids are opening brackets, closing brackets and leaves, and each opening bracket's closer."""

    is_open: torch.Tensor  # (V,) bool
    is_close: torch.Tensor  # (V,) bool
    is_leaf: torch.Tensor  # (V,) bool
    closer: torch.Tensor  # (V,) long: the id of ")X" for "(X", else -1

    @classmethod
    def of(cls, tok: Tokenizer, style: str) -> TreeVocab:
        """From the tokenizer's whole target pieces (``▁(X``, ``▁)X``, ``▁XX`` or ``▁TAG``)."""
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
        return cls(is_open, is_close, is_leaf, closer)

    def to(self, device: torch.device | str) -> TreeVocab:
        return TreeVocab(*(t.to(device) for t in (self.is_open, self.is_close, self.is_leaf, self.closer)))


class WellFormed:
    """The search's step rule (``search.Rules.step_rule``) for sentences of ``words`` (B,) words each."""

    def __init__(self, vocab: TreeVocab, words: torch.Tensor) -> None:
        self.vocab, self.words = vocab, words

    def ban(self, lprobs: torch.Tensor, history: torch.Tensor, sent: torch.Tensor, rows: int,
            limit: torch.Tensor | None = None) -> None:
        """In place on (N, V): -inf for every token that would not keep the output a tree prefix. A row
        left with nothing (the length limit forcing EOS into an unfinished tree) keeps EOS."""
        v = self.vocab
        eos = lprobs[:, EOS].clone()
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
        started = depth.gt(0)
        last_open = opens[:, -1] if t else torch.ones(n, dtype=torch.bool, device=history.device)
        rooted = t > 0  # the root has been opened (and, at depth 0, closed again)
        left = placed < words
        todo = words - placed
        # slots after this token (EOS included in |Y| <= limit); enough to finish the tree after it?
        room = (limit.repeat_interleave(rows) - t - 1) if limit is not None else torch.full_like(words, 1 << 30)
        allowed = torch.zeros_like(lprobs, dtype=torch.bool)
        can_open = left & (started | (not rooted)) & (todo + depth + 2 <= room)
        allowed |= v.is_open[None, :] & can_open[:, None]
        allowed |= v.is_leaf[None, :] & (left & started & (todo - 1 + depth + 1 <= room))[:, None]
        can_close = started & ~last_open & (depth.gt(1) | ~left) & (todo + depth <= room)
        close_id = v.closer[top].clamp(min=0)
        allowed.scatter_(1, close_id[:, None], can_close[:, None] | allowed.gather(1, close_id[:, None]))
        allowed[:, EOS] = (depth.eq(0) & ~left) if rooted else torch.zeros(n, dtype=torch.bool, device=lprobs.device)
        lprobs.masked_fill_(~allowed, NEG_INF)
        stuck = ~lprobs.isfinite().any(1)
        lprobs[:, EOS] = torch.where(stuck, eos, lprobs[:, EOS])


def tree_rule(tok: Tokenizer, style: str, lines: list[str], device: torch.device | str
              ) -> Callable[[list[int]], WellFormed]:
    """For ``translate(step_rule=...)``: the rule for a batch of ``lines``' indices."""
    vocab = TreeVocab.of(tok, style).to(device)
    words = torch.tensor(word_counts(lines), dtype=torch.long, device=device)
    return lambda rows: WellFormed(vocab, words[torch.tensor(rows, dtype=torch.long, device=device)])


def word_counts(lines: list[str]) -> list[int]:
    """Words per source line (the treebank's sources are space-separated words)."""
    return [len(line.split()) for line in lines]
