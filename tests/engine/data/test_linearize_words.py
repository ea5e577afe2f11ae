"""The lexicalized linearization (``data.dataset.linearization: words``): the sentence's words as the
leaves, in either order. Hand-made trees and sequences for each repair, the round trip over every tree of
the NLTK sample (from the mirror), the spec field, the files at a prefix rewritten when the leaves change,
and only the brackets kept whole in the shared vocabulary."""

from __future__ import annotations

from pathlib import Path

import pytest

from tbuild.builder import SpecError, load_spec
from tbuild.builder.spec import DataSpec
from tbuild.engine.data.datasets import ensure_data
from tbuild.engine.data.linearize import leaf_text, linearize, repair
from tbuild.engine.data.tokenizer import whole_target_tokens
from tbuild.engine.data.treebank import written_form
from tbuild.engine.data.trees import Tree, read_treebank, read_trees

TREE = "( (S (NP-SBJ (NNP Ms.) (NNP Haag)) (VP (VBZ plays) (NP (NNP Elianti))) (. .)))"
WORDS, TAGS = ["It", "purred", "."], ["PRP", "VBD", "."]


def test_the_words_are_the_leaves_in_either_order() -> None:
    tree = next(read_treebank(TREE, "x"))
    assert linearize(tree, "words") == "(S (NP Ms. Haag )NP (VP plays (NP Elianti )NP )VP . )S"
    assert linearize(tree, "words", "in_order") == "Ms. (NP Haag )NP (S plays (VP Elianti (NP )NP )VP . )S"
    # a word with a bracket in it (from a decoded input; the treebank has none) is written as the treebank
    # writes one: no leaf reads as a bracket
    odd = Tree("TOP", [Tree("S", [Tree("NP", [Tree("NN", ["a(b)"])]), Tree("NN", [")x"])])])
    assert linearize(odd, "words") == "(S (NP a-LRB-b-RRB- )NP -RRB-x )S"
    assert leaf_text("(") == "-LRB-" and leaf_text("Haag") == "Haag"


@pytest.mark.parametrize(("order", "sequence", "tree", "fixes"), [
    ("top_down", "(S (NP It )NP purred . )S", "(S (NP (PRP It)) (VBD purred) (. .))", {}),
    ("top_down", "(S (NP It )NP purrs . )S", "(S (NP (PRP It)) (VBD purred) (. .))", {"words_replaced": 1}),
    ("top_down", "(S It purred )S", "(S (PRP It) (VBD purred) (. .))", {"leaves_added": 1}),
    ("top_down", "(S It purred . . )S", "(S (PRP It) (VBD purred) (. .))",
     {"leaves_dropped": 1}),
    ("top_down", "(S (NP It purred .", "(S (NP (PRP It) (VBD purred) (. .)))", {"unclosed": 2}),
    ("top_down", ")S (S It purred . )VP", "(S (PRP It) (VBD purred) (. .))",
     {"extra_close": 1, "mismatched_close": 1}),
    ("in_order", "It (NP )NP (S purred . )S", "(S (NP (PRP It)) (VBD purred) (. .))", {}),
    ("in_order", "He (NP )NP (S purred )S", "(S (NP (PRP It)) (VBD purred) (. .))",
     {"words_replaced": 1, "leaves_added": 1}),
    ("in_order", "(NP It )NP (S purred . )S", "(S (NP (PRP It)) (VBD purred) (. .))", {"open_without_child": 1}),
    ("in_order", "It purred (S . . )S", "(PRP It) (S (VBD purred) (. .))", {"leaves_dropped": 1}),
])
def test_repair_reads_words_by_position(order: str, sequence: str, tree: str, fixes: dict[str, int]) -> None:
    """Leaf i is the input's word i, whatever the output wrote there (counted when it differs): the
    tree's leaves are always the input's words in order, as EVALB needs them."""
    back, fix = repair(sequence, WORDS, TAGS, "words", order)  # type: ignore[arg-type]
    assert str(back) == f"(TOP {tree})"
    assert {name: n for name, n in fix.counts().items() if n} == fixes


def test_without_gold_tags_the_leaves_are_xx_and_brackets_escaped() -> None:
    back, fix = repair("(S -LRB- purred -RRB- )S", ["(", "purred", ")"], None, "words")
    assert str(back) == "(TOP (S (XX -LRB-) (XX purred) (XX -RRB-)))" and not fix.needed


@pytest.fixture(scope="module")
def sample(treebank_sample: list) -> list:
    return treebank_sample


@pytest.mark.parametrize("order", ["top_down", "in_order"])
def test_round_trip_on_every_sample_tree(sample: list, order: str) -> None:
    for tree in sample:
        sequence = linearize(tree, "words", order)
        leaves = [t for t in sequence.split() if not t.startswith(("(", ")"))]
        assert leaves == [leaf_text(w) for w in tree.words()], sequence
        back, fix = repair(sequence, tree.words(), tree.tags(), "words", order)
        assert str(back) == str(tree) and not fix.needed, sequence
        assert str(read_trees(str(back), "again")[0]) == str(tree)


def test_the_spec_field() -> None:
    spec = load_spec({"data": {"dataset": {"kind": "treebank", "linearization": "words", "order": "in_order"}}}).spec
    assert (spec.data.dataset.linearization, spec.data.dataset.order) == ("words", "in_order")
    with pytest.raises(SpecError, match=r"data\.dataset\.linearization: Input should be 'xx', 'tags' or 'words'"):
        load_spec({"data": {"dataset": {"kind": "treebank", "linearization": "lexical"}}})


def test_only_the_brackets_are_whole_pieces() -> None:
    """The words of a lexicalized target stay subwords, split as the source is (data.tokenizer.target_tokens
    auto); ``whole`` still makes every token whole, as documented."""
    targets = ["(S (NP Ms. Haag )NP (VP plays )VP . )S"]
    words = load_spec({"data": {"dataset": {"kind": "treebank", "linearization": "words"}}}).spec
    assert whole_target_tokens(words, targets) == ["(NP", "(S", "(VP", ")NP", ")S", ")VP"]
    every = load_spec({"data": {"dataset": {"kind": "treebank", "linearization": "words"},
                                "tokenizer": {"target_tokens": "whole"}}}).spec
    assert "Haag" in whole_target_tokens(every, targets)


def _data(out: Path, wsj: Path, **dataset: str) -> DataSpec:
    splits = {s: str(out / s) for s in ("train", "valid", "test")}
    spec = {"data": {"dataset": {"kind": "treebank", "source": "wsj", "wsj": str(wsj), **dataset},
                     "target_lang": "parse", **splits}}
    return load_spec(spec).spec.data


def test_files_written_with_other_leaves_are_rewritten(tmp_path: Path) -> None:
    wsj, out, said = tmp_path / "wsj", tmp_path / "out", []
    for section in range(0, 25):
        (wsj / f"{section:02d}").mkdir(parents=True)
        (wsj / f"{section:02d}" / f"wsj_{section:02d}01.mrg").write_text(
            f"( (S (NP-SBJ (NN w{section}) ) (VP (VBD ran) ) (. .) ))\n")
    target, source = out / "test.parse", out / "test.en"
    ensure_data(_data(out, wsj, linearization="words"), said.append)
    assert target.read_text() == "(S (NP w23 )NP (VP ran )VP . )S\n"
    assert written_form(target, source) == ("words", "top_down")
    said.clear()
    ensure_data(_data(out, wsj, linearization="words"), said.append)
    assert said == []  # the same form: nothing written
    ensure_data(_data(out, wsj, linearization="tags"), said.append, splits=("test",))
    assert target.read_text() == "(S (NP NN )NP (VP VBD )VP . )S\n"
    assert written_form(target, source) == ("tags", "top_down")
    ensure_data(_data(out, wsj, linearization="words", order="in_order"), said.append, splits=("test",))
    assert said[-2] == f"data.test: {target} holds tags top_down trees, not words in_order; writing the test " \
        f"trees of WSJ in {wsj}"
    assert target.read_text() == "w23 (NP )NP (S ran (VP )VP . )S\n"
    assert written_form(target, source) == ("words", "in_order")
