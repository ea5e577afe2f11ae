"""A masked LM's rows (engine/data/masked.py) against BERT's rule (Devlin et al. 2019 §3.1): 15% of a line's
pieces chosen (at least one), 80% of them [MASK], 10% a random piece, 10% kept; labels at the chosen
positions only; never EOS, PAD or BOS; the same rows for the same seed, copy and line; the tokenizer's [MASK]
control piece."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tbuild.builder.spec import MaskingSpec, TokenizerSpec
from tbuild.components.specs.special import BOS, EOS, PAD
from tbuild.engine.data.masked import MaskedLines, chosen_count, mask_id, mask_row
from tbuild.engine.data.tokenizer import Tokenizer
from tbuild.engine.data.word_labels import LABEL_OFFSET
from tbuild.engine.errors import DataError

MASK = 4
NEVER = (PAD, BOS, EOS, MASK)  # the ids never hidden: the special ones, [MASK] last
REGULAR = np.arange(5, 1000)


def rows(n: int, seed: int = 0) -> list[list[int]]:
    """``n`` synthetic rows: 5 to 40 regular pieces, then EOS."""
    rng = np.random.default_rng(seed)
    return [[*rng.integers(5, 1000, size=int(rng.integers(5, 41))).tolist(), EOS] for _ in range(n)]


def test_chosen_count_is_the_rate_rounded_half_up_and_at_least_one() -> None:
    assert chosen_count(np.array([0, 1, 3, 10, 20, 100]), 0.15).tolist() == [0, 1, 1, 2, 3, 15]


def test_the_rates_hold_on_many_rows() -> None:
    """Over 4,000 rows: the chosen share is 15% (each row's rounded count exactly), and of the chosen pieces
    80% are [MASK], 10% another piece, 10% kept, within 1.5 points; labels sit at the chosen positions only."""
    masking = MaskingSpec()
    chosen = masked = replaced = kept = candidates = 0
    for i, row in enumerate(rows(4000)):
        ids = np.array(row)
        src, tgt = mask_row(ids, np.random.default_rng(i), masking, NEVER, REGULAR)
        at = tgt != PAD
        assert at.sum() == chosen_count(np.array([len(ids) - 1]), 0.15)[0]
        assert (tgt[at] - LABEL_OFFSET == ids[at]).all()  # the original piece, at the chosen positions
        assert (src[~at] == ids[~at]).all()  # everything else as it was
        assert not at[-1] and src[-1] == EOS  # EOS is never chosen
        chosen, candidates = chosen + int(at.sum()), candidates + len(ids) - 1
        masked += int((src[at] == MASK).sum())
        kept += int((src[at] == ids[at]).sum())
        replaced += int(((src[at] != MASK) & (src[at] != ids[at])).sum())
    assert chosen / candidates == pytest.approx(0.15, abs=0.01)
    assert masked / chosen == pytest.approx(0.8, abs=0.015)
    assert replaced / chosen == pytest.approx(0.1, abs=0.015)  # a random piece (rarely the same one: counted kept)
    assert kept / chosen == pytest.approx(0.1, abs=0.015)


def test_random_replacements_are_regular_pieces_and_specials_are_never_chosen() -> None:
    ids = np.array([BOS, 7, 8, MASK, 9, 10, 11, 12, PAD, 13, EOS])
    for seed in range(300):
        src, tgt = mask_row(ids, np.random.default_rng(seed), MaskingSpec(rate=0.5, mask=0.0, random=1.0), NEVER,
                            REGULAR)
        at = np.flatnonzero(tgt != PAD)
        assert set(ids[at].tolist()) <= {7, 8, 9, 10, 11, 12, 13}  # never BOS, [MASK], PAD or EOS
        assert all(int(src[p]) in set(REGULAR.tolist()) for p in at)
    assert len(at) == 4  # 0.5 × 7 candidates, rounded half up


def test_rows_are_the_same_for_the_same_seed_and_differ_by_copy() -> None:
    data = rows(50)
    make = lambda seed: MaskedLines(data, masking=MaskingSpec(copies=3), seed=seed, split="train",  # noqa: E731
                                    copies=3, never=NEVER, regular=REGULAR)
    a, b, c = make(1), make(1), make(2)
    assert len(a) == 150 and a.src_lengths.tolist() == [len(r) for r in data] * 3
    index = np.arange(150)
    assert (a.padded(index, "src", PAD) == b.padded(index, "src", PAD)).all()
    assert (a.padded(index, "tgt", PAD) == b.padded(index, "tgt", PAD)).all()
    assert not (a.padded(index, "src", PAD) == c.padded(index, "src", PAD)).all()
    first, second = a.padded(np.arange(50), "tgt", PAD), a.padded(np.arange(50, 100), "tgt", PAD)
    assert not (first == second).all()  # copy 1 of each line is masked differently from copy 0
    tgt = a.padded(index, "tgt", PAD)
    assert ((tgt != PAD).sum(1) == a.tgt_lengths).all()  # the target lengths known before masking are right
    src = a.padded(index[::-1].copy(), "src", PAD)  # any order: row r is always the same row
    assert (src[::-1] == a.padded(index, "src", PAD)).all()


def test_the_tokenizer_has_a_mask_control_piece(tmp_path: Path) -> None:
    lines = ["a dog runs in the park", "the cat sits on a mat", "[MASK] is text here"] * 20
    tok = Tokenizer.train(lines, TokenizerSpec(vocab_size=40), tmp_path / "m", controls=["[MASK]"])
    i = mask_id(tok)
    assert i == 4 and tok.sp.id_to_piece(i) == "[MASK]"
    assert i not in {t for ids in tok.encode(lines) for t in ids}  # no text encodes to it
    plain = Tokenizer.train(lines, TokenizerSpec(vocab_size=40), tmp_path / "p")
    with pytest.raises(DataError, match=r"has no \[MASK\] control piece"):
        mask_id(plain)
