"""The parser's diagnosis (``tbuild evaluate --diagnose``) against figures worked out by hand."""

from __future__ import annotations

import math

import torch
from torch import nn

from tbuild.components.specs.special import BOS, DEFAULT, EOS
from tbuild.engine.data.pairs import Pairs
from tbuild.engine.data.trees import read_trees
from tbuild.engine.device.policy import Policy
from tbuild.engine.tasks.parsing.constrained import TreeVocab
from tbuild.engine.tasks.parsing.diagnosis import (
    BINS,
    SpanErrors,
    bin_name,
    by_length,
    floor_score,
    right_branching,
    spans,
    token_accuracy,
)
from tbuild.engine.tasks.parsing.evalb import evalb

GOLD = "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .)))"


def tree(text: str):  # noqa: ANN201
    return read_trees(text, "test")[0]


def test_right_branching_chains_x_over_the_gold_preterminals() -> None:
    assert str(right_branching(tree("(TOP (S (NP (DT A) (NN b)) (VBD c)))"))) == \
        "(TOP (X (DT A) (X (NN b) (VBD c))))"
    assert str(right_branching(tree("(TOP (NN a))"))) == "(TOP (X (NN a)))"


def test_floor_is_unlabelled_evalb_of_the_chain() -> None:
    # COLLINS.prm drops the final '.', so the chain's brackets are [0,6] [1,6] .. [5,6] (6 of them);
    # gold: S [0,6], NP [0,2], VP [2,6], PP [3,6], NP [4,6]; unlabelled matches [0,6] [2,6] [3,6] [4,6]
    scored = floor_score([tree(GOLD)])
    assert (scored.all.match, scored.all.gold, scored.all.test) == (4, 5, 6)
    assert math.isclose(scored.all.fmeasure, 2 * 4 / (5 + 6) * 100)


def test_spans_and_span_errors() -> None:
    gold = tree(GOLD)
    assert sorted(spans(gold)) == [("NP", 0, 2), ("NP", 4, 6), ("PP", 3, 6), ("S", 0, 7), ("VP", 2, 6)]
    test = tree("(TOP (S (NP (DT The) (NN cat) (VBD sat)) (ADJP (IN on)) (VP (DT the) (NN mat)) (. .)))")
    errors = SpanErrors()
    errors.add(gold, test)
    # S [0,7] right; NP [0,3] starts like NP [0,2]: wrong length; ADJP [3,4] other; VP [4,6] is NP's place
    assert errors.to_json() == {"right": 1, "wrong_label": 1, "wrong_length": 1, "other": 1}


def test_by_length_bins_each_sentence_once() -> None:
    short, long = "(TOP (S (NN a) (VBZ b)))", "(TOP (S " + " ".join(["(NN w)"] * 25) + "))"
    scored = evalb([short, long, short], [short, long, short])
    totals = by_length(scored)
    assert [t.sentences for t in totals] == [2, 0, 1, 0, 0, 0] and len(totals) == len(BINS) + 1
    assert bin_name(0) == "1-10" and bin_name(2) == "21-30" and bin_name(len(BINS)) == ">60"


class _Fixed(nn.Module):
    """Predicts a fixed next token per (row's first input token, position): a stand-in for a model."""

    def __init__(self, vocab: int, table: dict[tuple[int, int], int]) -> None:
        super().__init__()
        self.vocab, self.table = vocab, table

    def forward(self, src: torch.Tensor, tgt: torch.Tensor, src_pad: torch.Tensor | None = None) -> torch.Tensor:
        logits = torch.zeros(*tgt.shape, self.vocab)
        for b in range(tgt.size(0)):
            for t in range(tgt.size(1)):
                logits[b, t, self.table.get((int(src[b, 0]), t), 0)] = 1.0
        return logits


def test_token_accuracy_counts_exact_and_same_kind_by_gold_kind() -> None:
    size = 12
    is_open, is_close, is_leaf = (torch.zeros(size, dtype=torch.bool) for _ in range(3))
    is_open[[4, 5]], is_close[[6, 7]], is_leaf[8] = True, True, True  # (S (NP )S )NP XX
    vocab = TreeVocab(is_open, is_close, is_leaf, torch.full((size,), -1), BOS, EOS)
    gold = [4, 8, 8, 6, EOS]  # (S XX XX )S EOS
    predicted = [5, 8, 6, 6, 8]  # (NP: same kind; XX right; )S where XX: wrong kind; )S right; XX for EOS
    model = _Fixed(size, {(9, t): p for t, p in enumerate(predicted)})
    pairs = Pairs([[9, EOS]], [gold])
    found = token_accuracy(model, pairs, vocab, Policy(torch.device("cpu")), batch_tokens=100, special=DEFAULT)
    assert found["open"] == {"tokens": 1, "exact": 0.0, "move": 100.0}
    assert found["leaf"] == {"tokens": 2, "exact": 50.0, "move": 50.0}
    assert found["close"] == {"tokens": 1, "exact": 100.0, "move": 100.0}
    assert found["eos"] == {"tokens": 1, "exact": 0.0, "move": 0.0}
