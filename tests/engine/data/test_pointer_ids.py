"""``model.decoder.pointer``'s id sets resolved against a tokenizer when the spec is fitted to it
(engine/data/pointer.py): the leaves of each treebank linearization, the word-first pieces of source words,
an explicit token list, and the one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tbuild.builder import load_spec
from tbuild.builder.spec import Spec, TokenizerSpec
from tbuild.components.specs.pointer import parse_ids
from tbuild.components.specs.special import BOS, EOS, PAD
from tbuild.engine.data.linearize import linearize
from tbuild.engine.data.tokenizer import Tokenizer, fit_vocab, whole_target_tokens
from tbuild.engine.data.trees import read_trees
from tbuild.engine.errors import DataError

TREES = ["(TOP (S (NP (NNP Ms.) (NNP Haag)) (VP (VBZ plays) (NP (NNP Elianti))) (. .)))",
         "(TOP (S (NP (PRP It)) (VP (VBD purred) (ADVP (RB contentedly))) (. .)))"]


def fitted(tmp_path: Path, linearization: str, pointer: dict | None = None) -> tuple[Spec, Tokenizer]:
    spec = load_spec({"model": {"decoder": {"pointer": pointer or {"kind": "next_word"}}},
                      "data": {"dataset": {"kind": "treebank", "linearization": linearization}}}).spec
    trees = [read_trees(t, "t")[0] for t in TREES]
    sources = [" ".join(t.words()) for t in trees] * 20
    targets = [linearize(t, linearization) for t in trees] * 20  # type: ignore[arg-type]
    tok = Tokenizer.train(sources + targets, TokenizerSpec(vocab_size=60), tmp_path / linearization,
                          whole=whole_target_tokens(spec, targets))
    return fit_vocab(spec, tok, lambda _: None), tok


def test_xx_advances_on_xx_and_units_are_the_words_first_pieces(tmp_path: Path) -> None:
    spec, tok = fitted(tmp_path, "xx")
    pointer = spec.model.decoder.pointer
    assert pointer is not None and pointer.source == "words"
    assert parse_ids(pointer.advance_ids or "") == [tok.sp.piece_to_id("\u2581XX")]
    starts = set(parse_ids(pointer.unit_ids or ""))
    for word in ["Ms.", "Haag", "plays", "Elianti", "contentedly"]:
        first, *rest = tok.encode([word])[0]
        assert first in starts and not starts & set(rest)
    assert not starts & {PAD, BOS, EOS}
    assert spec.model.vocab_size == tok.vocab_size  # the vocabulary is fitted as before


def test_tags_advance_on_every_tag(tmp_path: Path) -> None:
    spec, tok = fitted(tmp_path, "tags")
    pointer = spec.model.decoder.pointer
    assert pointer is not None
    tags = {tok.sp.id_to_piece(i).removeprefix("\u2581") for i in parse_ids(pointer.advance_ids or "")}
    assert tags == {"NNP", "VBZ", "PRP", "VBD", "RB", "."}


def test_words_advance_on_every_piece_and_units_are_pieces(tmp_path: Path) -> None:
    spec, tok = fitted(tmp_path, "words")
    pointer = spec.model.decoder.pointer
    assert pointer is not None and pointer.source == "pieces" and pointer.unit_ids is None
    advance = set(parse_ids(pointer.advance_ids or ""))
    pieces = [tok.sp.id_to_piece(i) for i in range(tok.vocab_size)]
    brackets = {i for i, p in enumerate(pieces) if p.removeprefix("\u2581")[:1] in ("(", ")") and len(p) > 2}
    assert brackets and not advance & brackets and not advance & {PAD, BOS, EOS}
    assert set(tok.encode(["Ms. Haag plays Elianti ."])[0]) <= advance


def test_a_listed_token_and_given_ids(tmp_path: Path) -> None:
    spec, tok = fitted(tmp_path, "xx", {"kind": "next_word", "advance": ["XX"], "source": "pieces"})
    assert spec.model.decoder.pointer.advance_ids == str(tok.sp.piece_to_id("\u2581XX"))  # type: ignore[union-attr]
    kept, _ = fitted(tmp_path, "xx", {"kind": "next_word", "advance_ids": "7", "unit_ids": "9-11"})
    assert (kept.model.decoder.pointer.advance_ids, kept.model.decoder.pointer.unit_ids) == ("7", "9-11")  # type: ignore[union-attr]
    with pytest.raises(DataError, match=r"model.decoder.pointer.advance: 'NOPE' is not one piece"):
        fitted(tmp_path, "xx", {"kind": "next_word", "advance": ["NOPE"]})
