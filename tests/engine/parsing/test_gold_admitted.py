"""The well-formed constraint is not what caps a parser's score: for every tree of NLTK's treebank sample
(all 3,914, both linearizations), forcing the gold token sequence through ``WellFormed`` meets no ban at
any step, EOS is allowed exactly once the tree is complete, and the forced sequences, repaired with the
gold tags and scored by EVALB (COLLINS.prm) against the gold trees, give F1 100 and complete match 100."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from tbuild.builder.tokens import EOS, PAD
from tbuild.engine.data.linearize import linearize
from tbuild.engine.data.treebank import SAMPLE_FILES, sample_trees
from tbuild.engine.data.trees import Tree
from tbuild.engine.parsing.constrained import TreeVocab, WellFormed
from tbuild.engine.parsing.evalb import collins, evalb
from tbuild.engine.parsing.evaluation import to_trees

FIRST = 4  # ids below are the special tokens (PAD, UNK, BOS, EOS)


@pytest.fixture(scope="module")
def sample() -> list[Tree]:
    mirror = os.environ.get("TBUILD_DATA_MIRROR")
    archive = Path(mirror or "") / "treebank-sample" / "treebank.zip"
    if not mirror or not archive.is_file():
        pytest.skip("the NLTK treebank sample is not in $TBUILD_DATA_MIRROR")
    trees = [t for split in ("train", "valid", "test") for t in sample_trees(archive, SAMPLE_FILES[split])]
    assert len(trees) == 3914
    return trees


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
    return ids, TreeVocab(is_open, is_close, is_leaf, closer)


@pytest.mark.parametrize("style", ["xx", "tags"])
def test_the_constraint_admits_every_gold_tree(sample: list[Tree], style: str) -> None:
    sequences = [linearize(t, style).split() for t in sample]
    ids, vocab = _vocab(sequences, style)
    longest = max(len(s) for s in sequences)
    gold = torch.full((len(sample), longest + 1), PAD, dtype=torch.long)  # each followed by EOS
    for row, tokens in enumerate(sequences):
        gold[row, : len(tokens)] = torch.tensor([ids[t] for t in tokens])
        gold[row, len(tokens)] = EOS
    lengths = torch.tensor([len(s) for s in sequences])
    rule = WellFormed(vocab, torch.tensor([len(t.words()) for t in sample]))
    everyone = torch.arange(len(sample))
    for t in range(longest + 1):
        live = (lengths >= t).nonzero().squeeze(1)  # rows whose gold has a token (or its EOS) at step t
        lprobs = torch.zeros(len(live), FIRST + len(ids))
        rule.ban(lprobs, gold[live, :t], everyone[live], 1, limit=None)
        allowed = lprobs.gather(1, gold[live, t : t + 1]).squeeze(1).isfinite()
        assert allowed.all(), f"step {t}: gold token banned in trees {live[~allowed][:5].tolist()}"
        early = lprobs[:, EOS].isfinite() & lengths[live].ne(t)
        assert not early.any(), f"step {t}: EOS allowed inside trees {live[early][:5].tolist()}"
    outputs = [" ".join(s) for s in sequences]
    tests, repairs = to_trees(outputs, [" ".join(t.words()) for t in sample], [t.tags() for t in sample], style)
    assert repairs.to_json()["repaired"] == 0
    scored = evalb([str(t) for t in sample], tests, collins())
    assert scored.all.fmeasure == 100.0 and scored.all.complete_match == 100.0
    assert scored.all.valid == len(sample)
