"""The well-formed constraint is not what caps a parser's score: for every tree of NLTK's treebank sample
(all 3,914, both leaf styles, both orders: top-down and in-order), forcing the gold token sequence
through ``WellFormed`` meets no ban at any step, EOS is allowed exactly where the tokens so far are a
whole tree, and the forced sequences, repaired with the gold tags and scored by EVALB (COLLINS.prm)
against the gold trees, give F1 100 and complete match 100. Top-down, that is only at the end; in order,
a tree whose root is unary over a phrase, ``XX (ADJP … )ADJP (FRAG XX )FRAG (SQ )SQ``, is already a whole
tree before its last constituent, so there EOS is allowed before the end too (the model chooses)."""

from __future__ import annotations

import pytest
import torch

from tbuild.components.specs.special import BOS, EOS, PAD
from tbuild.engine.data.linearize import TreeForm, linearize
from tbuild.engine.data.trees import Tree
from tbuild.engine.tasks.parsing.constrained import TreeVocab, WellFormed
from tbuild.engine.tasks.parsing.evalb import collins, evalb
from tbuild.engine.tasks.parsing.evaluation import to_trees

FIRST = 4  # ids below are the special tokens (PAD, UNK, BOS, EOS)


@pytest.fixture(scope="module")
def sample(treebank_sample: list[Tree]) -> list[Tree]:
    return treebank_sample


def _vocab(sequences: list[list[str]], style: str) -> tuple[dict[str, int], TreeVocab]:
    """An id for every whole token of the sequences, and which ids open, close or are leaves."""
    ids = {t: FIRST + i for i, t in enumerate(sorted({t for s in sequences for t in s}))}
    size = FIRST + len(ids)
    is_open, is_close, is_leaf = (torch.zeros(size, dtype=torch.bool) for _ in range(3))
    closer = torch.full((size,), -1, dtype=torch.long)
    for token, i in ids.items():
        if token.startswith("(") and len(token) > 1:
            is_open[i], closer[i] = True, ids.get(")" + token[1:], -1)
        elif token.startswith(")") and len(token) > 1:
            is_close[i] = True
        elif style == "tags" or token == "XX":
            is_leaf[i] = True
    return ids, TreeVocab(is_open, is_close, is_leaf, closer, BOS, EOS)


def _whole_prefixes(sequences: list[list[str]], steps: int) -> torch.Tensor:
    """(B, steps) bool: whether the first t tokens of each sequence are a whole tree (its every leaf, no
    bracket open, the last token a closing one)."""
    whole = torch.zeros(len(sequences), steps, dtype=torch.bool)
    for row, tokens in enumerate(sequences):
        leaves = [i for i, tok in enumerate(tokens) if not tok.startswith(("(", ")"))]
        depth = 0
        for t, tok in enumerate(tokens, 1):
            depth += tok.startswith("(") - tok.startswith(")")
            whole[row, t] = depth == 0 and t > leaves[-1] and tok.startswith(")")
    return whole


def _unary_root(tree: Tree) -> bool:
    """Whether the tree's root constituent has a single child that is a phrase (not a pre-terminal)."""
    root = tree.children[0]
    return isinstance(root, Tree) and len(root.children) == 1 and not root.children[0].is_preterminal  # type: ignore[union-attr]


@pytest.mark.parametrize("order", ["top_down", "in_order"])
@pytest.mark.parametrize("style", ["xx", "tags"])
def test_the_constraint_admits_every_gold_tree(sample: list[Tree], style: str, order: str) -> None:
    sequences = [linearize(t, style, order).split() for t in sample]  # type: ignore[arg-type]
    ids, vocab = _vocab(sequences, style)
    longest = max(len(s) for s in sequences)
    gold = torch.full((len(sample), longest + 1), PAD, dtype=torch.long)  # each followed by EOS
    for row, tokens in enumerate(sequences):
        gold[row, : len(tokens)] = torch.tensor([ids[t] for t in tokens])
        gold[row, len(tokens)] = EOS
    lengths = torch.tensor([len(s) for s in sequences])
    whole = _whole_prefixes(sequences, longest + 1)
    rule = WellFormed(vocab, torch.tensor([len(t.words()) for t in sample]), order)
    everyone = torch.arange(len(sample))
    for t in range(longest + 1):
        live = (lengths >= t).nonzero().squeeze(1)  # rows whose gold has a token (or its EOS) at step t
        lprobs = torch.zeros(len(live), FIRST + len(ids))
        rule.ban(lprobs, gold[live, :t], everyone[live], 1, limit=None)
        allowed = lprobs.gather(1, gold[live, t : t + 1]).squeeze(1).isfinite()
        assert allowed.all(), f"step {t}: gold token banned in trees {live[~allowed][:5].tolist()}"
        early = lprobs[:, EOS].isfinite() & ~whole[live, t]
        assert not early.any(), f"step {t}: EOS allowed inside trees {live[early][:5].tolist()}"
        assert lprobs[lengths[live].eq(t), EOS].isfinite().all(), f"step {t}: EOS banned after a whole tree"
    ends = whole.sum(1)
    unary_roots = [i for i, t in enumerate(sample) if _unary_root(t)]
    assert ends.ge(1).all() and ends.gt(1).nonzero().squeeze(1).tolist() == (unary_roots if order == "in_order" else [])
    outputs = [" ".join(s) for s in sequences]
    tests, repairs = to_trees(outputs, [" ".join(t.words()) for t in sample], [t.tags() for t in sample],
                              TreeForm(style, order))  # type: ignore[arg-type]
    assert repairs.to_json()["repaired"] == 0
    scored = evalb([str(t) for t in sample], tests, collins())
    assert scored.all.fmeasure == 100.0 and scored.all.complete_match == 100.0
    assert scored.all.valid == len(sample)
