"""Well-formed tree decoding: whatever a random model prefers, every output is one tree over exactly the
input words (matched brackets, one leaf per word, no empty constituent), within the length limit; top-down
and in order (``data.dataset.order``)."""

from __future__ import annotations

import pytest
import torch

from tbuild.components.specs.special import BOS, EOS, PAD
from tbuild.engine.data.linearize import linearize, repair
from tbuild.engine.decoding.search import Rules, beam_search
from tbuild.engine.tasks.parsing.constrained import TreeVocab, WellFormed
from tests.conftest import tiny_model

OPEN = {4: 6, 5: 7}  # (S -> )S, (NP -> )NP
CLOSE = {6, 7}
LEAF = 8  # XX
NAMES = {4: "(S", 5: "(NP", 6: ")S", 7: ")NP", 8: "XX"}


def vocab(size: int = 40) -> TreeVocab:
    is_open, is_close, is_leaf = (torch.zeros(size, dtype=torch.bool) for _ in range(3))
    closer = torch.full((size,), -1, dtype=torch.long)
    for o, c in OPEN.items():
        is_open[o], closer[o] = True, c
    for c in CLOSE:
        is_close[c] = True
    is_leaf[LEAF] = True
    return TreeVocab(is_open, is_close, is_leaf, closer, BOS, EOS)


def is_tree(tokens: list[int], words: int) -> bool:
    stack: list[int] = []
    leaves, roots = 0, 0
    filled: list[bool] = []
    for i, token in enumerate(tokens):
        if token in OPEN:
            if not stack:
                roots += 1
            stack.append(token)
            filled.append(False)
        elif token in CLOSE:
            if not stack or OPEN[stack.pop()] != token or not filled.pop():
                return False
            if filled:
                filled[-1] = True
        elif token == LEAF:
            if not stack:
                return False
            leaves += 1
            filled[-1] = True
        else:
            return False
        if not stack and i != len(tokens) - 1:
            return False
    return not stack and leaves == words and roots == 1


def _model_and_sources() -> tuple[torch.nn.Module, list[int], torch.Tensor]:
    """A tiny untrained model and five random sources of 1-9 words (each followed by EOS)."""
    torch.manual_seed(0)
    model = tiny_model()
    g = torch.Generator().manual_seed(0)
    lengths = [3, 6, 1, 9, 4]
    src = torch.full((len(lengths), max(lengths) + 1), PAD)
    for i, n in enumerate(lengths):
        src[i, :n] = torch.randint(9, 40, (n,), generator=g)
        src[i, n] = EOS
    return model, lengths, src


@pytest.mark.parametrize("beam", [1, 4])
def test_every_output_is_a_tree_over_the_words(beam: int) -> None:
    model, lengths, src = _model_and_sources()
    free = beam_search(model, src, src_pad=src.eq(PAD), beam=beam, nbest=beam, alpha=0.3, max_len_a=3.0, max_len_b=6)
    assert not all(is_tree(h.tokens, n) for s, n in zip(free, lengths, strict=True) for h in s)
    rule = WellFormed(vocab(), torch.tensor(lengths))
    held = beam_search(model, src, src_pad=src.eq(PAD), beam=beam, nbest=beam, alpha=0.3, max_len_a=3.0, max_len_b=6,
                       rules=Rules(step_rule=rule))
    for sentence, n in zip(held, lengths, strict=True):
        assert sentence and all(is_tree(h.tokens, n) for h in sentence), (sentence[0].tokens, n)
        # the limit (3·|X| + 6, EOS counted) holds: the rule leaves room to close what it opens
        assert all(len(h.tokens) + 1 <= int(3.0 * (n + 1) + 6) for h in sentence)


def test_a_tight_limit_still_gives_a_tree() -> None:
    """Limit 2·words + 3 (EOS counted): room for a root, the leaves and one constituent per word at most."""
    torch.manual_seed(1)
    model = tiny_model()
    src = torch.tensor([[20, 21, 22, EOS]])
    held = beam_search(model, src, src_pad=src.eq(PAD), beam=3, nbest=3, alpha=0.3, max_len_a=0.0, max_len_b=6,
                       rules=Rules(step_rule=WellFormed(vocab(), torch.tensor([3]))))
    assert all(is_tree(h.tokens, 3) and len(h.tokens) <= 5 for h in held[0])


def is_tree_in(order: str, tokens: list[int], words: int) -> bool:
    """Whether ``tokens`` are exactly the ``order`` linearization of one tree (a root constituent) over
    ``words`` words: read back with no repair, and written again the same."""
    if any(t not in NAMES for t in tokens):
        return False
    sequence = " ".join(NAMES[t] for t in tokens)
    tree, fix = repair(sequence, ["w"] * words, None, "xx", order)  # type: ignore[arg-type]
    root = tree.children[0] if len(tree.children) == 1 else None
    return (not fix.needed and root is not None and not root.is_preterminal  # type: ignore[union-attr]
            and linearize(tree, "xx", order) == sequence)  # type: ignore[arg-type]


@pytest.mark.parametrize("order", ["top_down", "in_order"])
def test_random_allowed_tokens_always_make_a_tree(order: str) -> None:
    """Any path through the allowed tokens, under limits down to the flattest tree's (words + 3, EOS
    counted), ends in a tree over exactly the words, within the limit."""
    g = torch.Generator().manual_seed(0)
    rows = 300
    words = torch.randint(1, 8, (rows,), generator=g)
    limit = words + 3 + torch.randint(0, 12, (rows,), generator=g)
    rule = WellFormed(vocab(), words, order)
    history = torch.zeros(rows, 0, dtype=torch.long)
    ended = torch.full((rows,), -1)
    for t in range(int(limit.max())):
        lprobs = torch.zeros(rows, 40)
        rule.ban(lprobs, history, torch.arange(rows), 1, limit)
        pick = torch.multinomial(lprobs.isfinite().float(), 1, generator=g).squeeze(1)
        ended = torch.where(ended.lt(0) & pick.eq(EOS), t, ended)
        history = torch.cat([history, pick[:, None]], 1)
    assert ended.ge(0).all() and (ended + 1).le(limit).all()
    outputs = [history[row, : int(ended[row])].tolist() for row in range(rows)]
    bad = [(" ".join(NAMES.get(t, str(t)) for t in out), int(n)) for out, n in zip(outputs, words, strict=True)
           if not is_tree_in(order, out, int(n))]
    assert not bad, bad[:3]
    assert len({tuple(o) for o in outputs}) > rows // 2  # varied trees, not one path
    assert (ended + 1).eq(limit).sum() > 10  # many ran into the limit: the room rule was needed


def test_in_order_first_moves() -> None:
    """In order the first token is a leaf, an opening bracket comes only after a completed item, a
    one-word sentence ends only once its root is closed (``XX (S )S``, 4 tokens with EOS: a shorter limit
    leaves nothing to start, and EOS is kept)."""
    rule = WellFormed(vocab(), torch.tensor([1, 2]), "in_order")

    def allowed(history: list[int], sent: int, limit: int | None = None) -> list[int]:
        lprobs = torch.zeros(1, 40)
        rule.ban(lprobs, torch.tensor([history], dtype=torch.long).reshape(1, -1), torch.tensor([sent]), 1,
                 None if limit is None else torch.tensor([limit]))
        return lprobs[0].isfinite().nonzero().squeeze(1).tolist()

    assert allowed([], 0) == allowed([], 0, limit=4) == [LEAF] and allowed([], 0, limit=3) == [EOS]
    assert allowed([], 1, limit=5) == [LEAF] and allowed([], 1, limit=4) == [EOS]
    assert allowed([LEAF, 5, 7], 1, limit=7) == [4, 5] and allowed([LEAF, 5, 7], 1, limit=6) == [EOS]
    assert allowed([LEAF], 0) == [4, 5]  # no EOS: the root must be a constituent
    assert allowed([LEAF, 4], 0) == [6]  # no leaf (all placed), its own closing bracket
    assert allowed([LEAF, 4, 6], 0) == [EOS, 4, 5]  # done, or unary above it
    assert allowed([LEAF, 5, 7], 1) == [4, 5]  # a word left: the NP must become a first child
    assert allowed([LEAF, 5, 7, 4], 1) == [6, LEAF]


@pytest.mark.parametrize("beam", [1, 4])
def test_in_order_beam_outputs_are_trees(beam: int) -> None:
    model, lengths, src = _model_and_sources()
    held = beam_search(model, src, src_pad=src.eq(PAD), beam=beam, nbest=beam, alpha=0.3, max_len_a=1.0, max_len_b=4,
                       rules=Rules(step_rule=WellFormed(vocab(), torch.tensor(lengths), "in_order")))
    for sentence, n in zip(held, lengths, strict=True):
        assert sentence and all(is_tree_in("in_order", h.tokens, n) for h in sentence), (sentence[0].tokens, n)
        assert all(len(h.tokens) + 1 <= int(1.0 * (n + 1) + 4) for h in sentence)  # |X| + 4 (EOS counted)
