"""Treebank reading and cleaning, linearization and repair: hand-made trees for each rule, and
round trips over every tree of the NLTK sample (from the mirror)."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from tbuild.engine.data.linearize import linearize, repair
from tbuild.engine.data.trees import read_treebank, read_trees
from tbuild.engine.errors import DataError

MRG = """
( (S
    (NP-SBJ-1 (DT The) (NN cat) )
    (VP (VBD sat)
      (NP (-NONE- *-1) )
      (PP-LOC=2 (IN on) (NP (DT the) (-LRB- -LRB-) (NN mat) (-RRB- -RRB-) )))
    (. .) ))
( (S (NP-SBJ (PRP It) ) (VP (VBD purred) ) (. .) ))
"""


def test_reads_several_trees_and_cleans_them() -> None:
    trees = list(read_treebank(MRG, "x.mrg"))
    assert [str(t) for t in trees] == [
        "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (-LRB- -LRB-) (NN mat) "
        "(-RRB- -RRB-)))) (. .)))",
        "(TOP (S (NP (PRP It)) (VP (VBD purred)) (. .)))"]
    assert trees[0].words() == ["The", "cat", "sat", "on", "the", "-LRB-", "mat", "-RRB-", "."]
    assert str(next(read_treebank("(S (NN a))", "y"))) == "(TOP (S (NN a)))"  # a labelled root goes under TOP


@pytest.mark.parametrize(("text", "message"), [
    ("( (S (NN a) )", r"x\.mrg: tree 1: unbalanced brackets: 1 left open at the end"),
    ("( (S (NN a)))\n( (S (NN b))))", r"x\.mrg: tree 3: unbalanced brackets: a closing bracket outside a tree"),
    ("   \n", r"x\.mrg: no trees \(an empty file\)"),
    ("( (S (NN a)))\n( (S (-NONE- *T*)))", r"x\.mrg: tree 2: no words \(only empty elements\)"),
    ("( (S (NN a))) stray", r"x\.mrg: tree 2: unbalanced brackets: text \(stray\) outside a tree"),
])
def test_bad_treebank_input_is_one_line(text: str, message: str) -> None:
    with pytest.raises(DataError, match=message):
        list(read_treebank(text, "x.mrg"))


def test_linearize_styles() -> None:
    tree = list(read_treebank(MRG, "x.mrg"))[1]
    assert linearize(tree) == "(S (NP XX )NP (VP XX )VP XX )S"
    assert linearize(tree, "tags") == "(S (NP PRP )NP (VP VBD )VP . )S"


def test_repair_counts_each_fix() -> None:
    words, tags = ["It", "purred", "."], ["PRP", "VBD", "."]
    tree, fix = repair(")S (S (NP XX )VP ed (VP XX XX XX (ADVP", words, tags)
    assert str(tree) == "(TOP (S (NP (PRP It)) (VP (VBD purred) (. .))))"
    assert fix.counts() == {"extra_close": 1, "unclosed": 3, "mismatched_close": 1, "leaves_added": 0,
                            "leaves_dropped": 1, "empty_removed": 1, "junk_dropped": 1, "open_without_child": 0,
                            "words_replaced": 0}
    tree, fix = repair("(S (NP PRP )NP (VP VBD )VP . )S", words, None, "tags")  # predicted tags kept
    assert str(tree) == "(TOP (S (NP (PRP It)) (VP (VBD purred)) (. .)))" and not fix.needed
    tree, fix = repair("(S (NP XX )NP )S", words, None)
    assert str(tree) == "(TOP (S (NP (XX It)) (XX purred) (XX .)))" and fix.leaves_added == 2
    tree, fix = repair("", ["(", "a"], None)
    assert str(tree) == "(TOP (XX -LRB-) (XX a))" and fix.needed


def _sample_trees() -> list:
    mirror = os.environ.get("TBUILD_DATA_MIRROR")
    zipped = Path(mirror or "/nonexistent") / "treebank-sample" / "treebank.zip"
    if not zipped.is_file():
        pytest.skip(f"the NLTK treebank sample is not in $TBUILD_DATA_MIRROR ({mirror})")
    with zipfile.ZipFile(zipped) as z:
        names = sorted(n for n in z.namelist() if n.startswith("treebank/combined/wsj_"))
        return [t for n in names[:40] for t in read_treebank(z.read(n).decode(), n)]


@pytest.mark.parametrize("style", ["xx", "tags"])
def test_round_trip_on_real_trees(style: str) -> None:
    trees = _sample_trees()
    assert len(trees) > 500
    for tree in trees:
        back, fix = repair(linearize(tree, style), tree.words(), tree.tags() if style == "xx" else None, style)
        assert str(back) == str(tree) and not fix.needed
        assert str(read_trees(str(back), "again")[0]) == str(tree)
