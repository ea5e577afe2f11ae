"""The in-order linearization (``data.dataset.order: in_order``, Liu & Zhang 2017): a constituent's label
after its first child. Hand-made trees and sequences for each rule and each repair, the round trip over
every tree of the NLTK sample (from the mirror), the spec field, and treebank files rewritten when the
order changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tbuild.builder import SpecError, load_spec
from tbuild.builder.spec import DataSpec
from tbuild.engine.data.datasets import ensure_data
from tbuild.engine.data.linearize import linearize, repair
from tbuild.engine.data.treebank import written_form
from tbuild.engine.data.trees import read_treebank, read_trees

TREE = "( (S (NP (DT The) (NN cat)) (VP (VBD sat) (ADVP (RB down))) (. .)))"
WORDS, TAGS = ["It", "purred", "."], ["PRP", "VBD", "."]


def test_in_order_puts_each_label_after_its_first_child() -> None:
    tree = next(read_treebank(TREE, "x"))
    assert linearize(tree, "xx", "in_order") == "XX (NP XX )NP (S XX (VP XX (ADVP )ADVP )VP XX )S"
    assert linearize(tree, "tags", "in_order") == "DT (NP NN )NP (S VBD (VP RB (ADVP )ADVP )VP . )S"
    assert linearize(tree, "xx") == linearize(tree, "xx", "top_down") == (
        "(S (NP XX XX )NP (VP XX (ADVP XX )ADVP )VP XX )S")  # the default order is unchanged
    one = next(read_treebank("( (NP (NN Yes)))", "y"))
    assert linearize(one, "xx", "in_order") == "XX (NP )NP"  # the root of a one-word sentence: unary


@pytest.mark.parametrize(("sequence", "tree", "fixes"), [
    ("(S XX (NP )NP XX XX )S", "(S (NP (PRP It)) (VBD purred) (. .))", {"open_without_child": 1}),
    (")S XX (S XX XX )S", "(S (PRP It) (VBD purred) (. .))", {"extra_close": 1}),
    ("XX (NP )VP (S XX XX )S", "(S (NP (PRP It)) (VBD purred) (. .))", {"mismatched_close": 1}),
    ("XX (NP XX (S XX", "(NP (PRP It) (S (VBD purred) (. .)))", {"unclosed": 2}),
    ("XX (S )S", "(S (PRP It) (VBD purred) (. .))", {"leaves_added": 2}),
    ("XX (S XX XX XX )S", "(S (PRP It) (VBD purred) (. .))", {"leaves_dropped": 1}),
    ("(NP )NP XX (S XX XX )S", "(S (PRP It) (VBD purred) (. .))", {"open_without_child": 1, "empty_removed": 1}),
    ("XX ed (S XX XX )S", "(S (PRP It) (VBD purred) (. .))", {"junk_dropped": 1}),
    ("XX XX (S XX )S", "(PRP It) (S (VBD purred) (. .))", {}),  # items left at depth 0 go under TOP
    ("", "(XX It) (XX purred) (XX .)", {"leaves_added": 3}),
])
def test_repair_counts_each_fix(sequence: str, tree: str, fixes: dict[str, int]) -> None:
    back, fix = repair(sequence, WORDS, TAGS if "XX It" not in tree else None, "xx", "in_order")
    assert str(back) == f"(TOP {tree})"
    assert {name: n for name, n in fix.counts().items() if n} == fixes


def test_repair_keeps_predicted_tags_and_escapes_brackets() -> None:
    back, fix = repair("PRP (NP )NP (S VBD (VP )VP . )S", WORDS, None, "tags", "in_order")
    assert str(back) == "(TOP (S (NP (PRP It)) (VP (VBD purred)) (. .)))" and not fix.needed
    back, fix = repair("XX (S XX )S", ["(", ")"], None, "xx", "in_order")
    assert str(back) == "(TOP (S (XX -LRB-) (XX -RRB-)))" and not fix.needed
    # a top-down sequence read in order: every opening bracket lacks its first child
    back, fix = repair("(S (NP XX )NP XX XX )S", WORDS, TAGS, "xx", "in_order")
    assert str(back) == "(TOP (S (NP (PRP It)) (VBD purred) (. .)))" and fix.counts()["open_without_child"] == 2


@pytest.fixture(scope="module")
def sample(treebank_sample: list) -> list:
    return treebank_sample


@pytest.mark.parametrize("style", ["xx", "tags"])
def test_round_trip_on_every_sample_tree(sample: list, style: str) -> None:
    for tree in sample:
        sequence = linearize(tree, style, "in_order")
        assert not sequence.startswith("(")
        back, fix = repair(sequence, tree.words(), tree.tags() if style == "xx" else None, style, "in_order")
        assert str(back) == str(tree) and not fix.needed, sequence
        assert str(read_trees(str(back), "again")[0]) == str(tree)


def test_the_spec_field() -> None:
    assert load_spec({"data": {"dataset": "treebank"}}).spec.data.dataset.order == "top_down"
    spec = load_spec({"data": {"dataset": {"kind": "treebank", "order": "in_order", "linearization": "tags"}}}).spec
    assert (spec.data.dataset.order, spec.data.dataset.linearization) == ("in_order", "tags")
    with pytest.raises(SpecError, match=r"data\.dataset\.order: Input should be 'top_down' or 'in_order'"):
        load_spec({"data": {"dataset": {"kind": "treebank", "order": "bottom_up"}}})


def _wsj(root: Path) -> Path:
    for section in range(0, 25):
        (root / f"{section:02d}").mkdir(parents=True)
        (root / f"{section:02d}" / f"wsj_{section:02d}01.mrg").write_text(
            f"( (S (NP-SBJ (NN w{section}) ) (VP (VBD ran) ) (. .) ))\n")
    return root


def _data(out: Path, wsj: Path, **dataset: str) -> DataSpec:
    splits = {s: str(out / s) for s in ("train", "valid", "test")}
    spec = {"data": {"dataset": {"kind": "treebank", "source": "wsj", "wsj": str(wsj), **dataset},
                     "target_lang": "parse", **splits}}
    return load_spec(spec).spec.data


def test_files_written_in_another_form_are_rewritten(tmp_path: Path) -> None:
    """The files at a prefix say which linearization and order they hold, so a changed spec rewrites them
    (the prepared training data, made from their size and time, follows)."""
    wsj, out, said = _wsj(tmp_path / "wsj"), tmp_path / "out", []
    target = out / "test.parse"
    ensure_data(_data(out, wsj), said.append)
    assert target.read_text() == "(S (NP XX )NP (VP XX )VP XX )S\n" and written_form(target) == ("xx", "top_down")
    said.clear()
    ensure_data(_data(out, wsj), said.append)
    assert said == []  # the same form: nothing written
    ensure_data(_data(out, wsj, order="in_order"), said.append, splits=("test",))
    assert target.read_text() == "XX (NP )NP (S XX (VP )VP XX )S\n" and written_form(target) == ("xx", "in_order")
    assert said[0] == f"data.test: {target} holds xx top_down trees, not xx in_order; writing the test trees of " \
        f"WSJ in {wsj}"
    ensure_data(_data(out, wsj, order="in_order", linearization="tags"), said.append, splits=("test",))
    assert target.read_text() == "NN (NP )NP (S VBD (VP )VP . )S\n" and written_form(target) == ("tags", "in_order")
    target.write_text("")
    ensure_data(_data(out, wsj), said.append, splits=("test",))
    assert "holds no trees" in said[-2] and written_form(target) == ("xx", "top_down")
