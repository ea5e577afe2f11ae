"""The well-formed rule's bans (``WellFormed.ban``, built from per-row moves and a class table) equal, value
for value, those of the earlier implementation that built a full (N, V) mask of allowed tokens (kept here
as the reference), on random tree prefixes of both orders, leaf tokens and lexicalized pieces, with
log-probs that other bans (and the length limit) left at -inf."""

from __future__ import annotations

import pytest
import torch

from tbuild.components.specs.special import BOS, EOS, PAD
from tbuild.engine.tasks.parsing.constrained import NEG_INF, TreeVocab, WellFormed, _State
from tests.engine.tasks.parsing.test_constrained import vocab


def _allow_close(v: TreeVocab, s: _State, allowed: torch.Tensor, can_close: torch.Tensor) -> None:
    close_id = v.closer[s.top].clamp(min=0)
    allowed.scatter_(1, close_id[:, None], can_close[:, None] | allowed.gather(1, close_id[:, None]))


def _allow_leaf(v: TreeVocab, s: _State, allowed: torch.Tensor, can_place: torch.Tensor) -> None:
    if s.next_leaf is None:
        allowed |= v.is_leaf[None, :] & can_place[:, None]
        return
    index = s.next_leaf[:, None]
    allowed.scatter_(1, index, can_place[:, None] | allowed.gather(1, index))


def _top_down(v: TreeVocab, s: _State, allowed: torch.Tensor) -> None:
    todo, depth, room, left, whole = s.todo, s.depth, s.room, s.left, ~s.mid
    started = depth.gt(0)
    rooted = s.t > 0
    can_open = left & whole & (started | (not rooted)) & (todo + depth + 2 <= room)
    allowed |= v.is_open[None, :] & can_open[:, None]
    _allow_leaf(v, s, allowed, left & started & (todo - 1 + depth + 1 <= room))
    _allow_close(v, s, allowed, started & whole & ~s.last_open & (depth.gt(1) | ~left) & (todo + depth <= room))
    allowed[:, EOS] = (depth.eq(0) & ~left) if rooted else torch.zeros_like(left)


def _in_order(v: TreeVocab, s: _State, allowed: torch.Tensor) -> None:
    todo, depth, room, left, whole = s.todo, s.depth, s.room, s.left, ~s.mid
    started = depth.gt(0)
    after_item = (v.is_leaf | v.is_close)[s.last] & whole
    allowed |= v.is_open[None, :] & (after_item & (todo + depth + 2 <= room))[:, None]
    need = torch.where(started, todo - 1 + depth + 1, todo - 1 + 3)
    _allow_leaf(v, s, allowed, left & (started | (s.t == 0) | s.mid) & (need <= room))
    need = todo + depth - 1 + 1 + torch.where(depth.eq(1) & left, 2, 0)
    _allow_close(v, s, allowed, started & whole & (need <= room))
    allowed[:, EOS] = depth.eq(0) & ~left & v.is_close[s.last] & (s.t > 0)


def reference_ban(rule: WellFormed, lprobs: torch.Tensor, history: torch.Tensor, sent: torch.Tensor, rows: int,
                  limit: torch.Tensor | None) -> int:
    """The earlier ``WellFormed.ban``: a full (N, V) mask of allowed tokens, filled, then scanned. Returns
    how many rows were left with nothing (and kept EOS)."""
    eos = lprobs[:, EOS].clone()
    state = rule._state(history, sent, rows, limit)
    allowed = torch.zeros_like(lprobs, dtype=torch.bool)
    (_in_order if rule.order == "in_order" else _top_down)(rule.vocab, state, allowed)
    lprobs.masked_fill_(~allowed, NEG_INF)
    stuck = ~lprobs.isfinite().any(1)
    lprobs[:, EOS] = torch.where(stuck, eos, lprobs[:, EOS])
    return int(stuck.sum())


def _words_vocab(size: int = 40) -> TreeVocab:
    """Style words: every piece but the brackets, PAD, BOS and EOS is a leaf."""
    v = vocab(size)
    is_leaf = ~(v.is_open | v.is_close)
    is_leaf[[0, 1, 2, 3]] = False
    return TreeVocab(v.is_open, v.is_close, is_leaf, v.closer, BOS, EOS)


@pytest.mark.parametrize("order", ["top_down", "in_order"])
@pytest.mark.parametrize("style", ["xx", "words"])
def test_bans_equal_the_full_mask_reference(order: str, style: str) -> None:
    g = torch.Generator().manual_seed(3)
    sentences, rows = 40, 3
    words = torch.randint(1, 7, (sentences,), generator=g)
    limit = words * 2 + 3 + torch.randint(0, 10, (sentences,), generator=g)
    pieces = None
    if style == "words":
        ids = torch.full((sentences, int(words.max()) + 1), PAD)
        start = torch.ones_like(ids, dtype=torch.bool)
        for i, n in enumerate(words.tolist()):
            ids[i, :n] = torch.randint(9, 40, (n,), generator=g)
            start[i, 1:n] = torch.rand(n - 1, generator=g) < 0.6  # some words of several pieces
        pieces = (ids, start)
    rule = WellFormed(vocab() if style == "xx" else _words_vocab(), words, order, pieces)
    sent = torch.arange(sentences)
    history = torch.zeros(sentences * rows, 0, dtype=torch.long)
    checked = stuck = 0
    for _ in range(int(limit.max())):
        lprobs = torch.randn(sentences * rows, 40, generator=g).log_softmax(-1)
        lprobs[torch.rand(lprobs.shape, generator=g) < 0.2] = NEG_INF  # other bans, the length limit's
        new, old = lprobs.clone(), lprobs.clone()
        rule.ban(new, history, sent, rows, limit)
        stuck += reference_ban(rule, old, history, sent, rows, limit)
        assert torch.equal(new, old)
        checked += 1
        # follow a random allowed token (EOS where nothing else is), as a search would
        weights = new.isfinite().float()
        weights[weights.sum(1).eq(0), EOS] = 1.0
        pick = torch.multinomial(weights, 1, generator=g)
        history = torch.cat([history, pick], 1)
    assert checked > 5 and stuck > 0  # the rows left with nothing were met too
