"""Well-formed tree decoding: whatever a random model prefers, every output is one tree over exactly the
input words (matched brackets, one leaf per word, no empty constituent), within the length limit."""

from __future__ import annotations

import pytest
import torch

from tbuild.builder.tokens import EOS, PAD
from tbuild.engine.decoding.search import Rules, beam_search
from tbuild.engine.parsing.constrained import TreeVocab, WellFormed
from tests.conftest import tiny_model

OPEN = {4: 6, 5: 7}  # (S -> )S, (NP -> )NP
CLOSE = {6, 7}
LEAF = 8  # XX


def vocab(size: int = 40) -> TreeVocab:
    is_open, is_close, is_leaf = (torch.zeros(size, dtype=torch.bool) for _ in range(3))
    closer = torch.full((size,), -1, dtype=torch.long)
    for o, c in OPEN.items():
        is_open[o], closer[o] = True, c
    for c in CLOSE:
        is_close[c] = True
    is_leaf[LEAF] = True
    return TreeVocab(is_open, is_close, is_leaf, closer)


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


@pytest.mark.parametrize("beam", [1, 4])
def test_every_output_is_a_tree_over_the_words(beam: int) -> None:
    torch.manual_seed(0)
    model = tiny_model()
    g = torch.Generator().manual_seed(0)
    lengths = [3, 6, 1, 9, 4]
    src = torch.full((len(lengths), max(lengths) + 1), PAD)
    for i, n in enumerate(lengths):
        src[i, :n] = torch.randint(9, 40, (n,), generator=g)
        src[i, n] = EOS
    free = beam_search(model, src, beam=beam, nbest=beam, alpha=0.3, max_len_a=3.0, max_len_b=6)
    assert not all(is_tree(h.tokens, n) for s, n in zip(free, lengths, strict=True) for h in s)
    rule = WellFormed(vocab(), torch.tensor(lengths))
    held = beam_search(model, src, beam=beam, nbest=beam, alpha=0.3, max_len_a=3.0, max_len_b=6,
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
    held = beam_search(model, src, beam=3, nbest=3, alpha=0.3, max_len_a=0.0, max_len_b=6,
                       rules=Rules(step_rule=WellFormed(vocab(), torch.tensor([3]))))
    assert all(is_tree(h.tokens, 3) and len(h.tokens) <= 5 for h in held[0])
