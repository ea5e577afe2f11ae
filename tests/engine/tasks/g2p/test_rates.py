"""PER and WER against their definitions: the edit distance against one computed by hand and against a brute force
over every alignment of short sequences; the rates as summed distances over reference phones and the share of
words wrong; the statistics per word summing to the same scores (paired bootstrap's input)."""

from __future__ import annotations

import itertools
import random
from functools import cache

import pytest

from tbuild.engine.tasks.g2p.rates import Rates, edit_distance, rate_measures


def brute_distance(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    """The fewest edits by the recursion's definition (delete, insert, substitute or match the first token)."""

    @cache
    def d(i: int, j: int) -> int:
        if i == len(a) or j == len(b):
            return len(a) - i + len(b) - j
        return min(d(i + 1, j) + 1, d(i, j + 1) + 1, d(i + 1, j + 1) + (a[i] != b[j]))

    return d(0, 0)


def test_the_edit_distance_of_a_hand_example() -> None:
    # K AE1 T S -> K AH0 T: one substitution (AE1 -> AH0), one deletion (S)
    assert edit_distance(["K", "AE1", "T", "S"], ["K", "AH0", "T"]) == 2
    assert edit_distance([], ["A", "B"]) == 2 and edit_distance(["A", "B"], []) == 2
    assert edit_distance(["A", "B", "C"], ["A", "B", "C"]) == 0


def test_the_edit_distance_is_the_recursions() -> None:
    rng = random.Random(5)
    for a_len, b_len in itertools.product(range(5), repeat=2):
        a = tuple(rng.choice("xyz") for _ in range(a_len))
        b = tuple(rng.choice("xyz") for _ in range(b_len))
        assert edit_distance(a, b) == brute_distance(a, b), (a, b)


def test_the_rates_are_summed_distances_and_words_wrong() -> None:
    refs = ["HH AH0 L OW1", "K AE1 T", "D AO1 G"]
    hyps = ["HH AH0 L OW1", "K AE1 T S", "D AA1"]  # 0 edits; 1 insertion; 1 substitution + 1 deletion
    rates = Rates.of(hyps, refs)
    assert rates.per == pytest.approx(100 * 3 / 10) and rates.wer == pytest.approx(100 * 2 / 3)
    per, wer = rate_measures(refs)
    assert (per.key, wer.key) == ("per", "wer")
    summed = per.statistics(hyps).sum(axis=0)
    assert per.score(summed) == pytest.approx(rates.per) and wer.score(summed) == pytest.approx(rates.wer)
    assert Rates.of([], []) == Rates(0.0, 0.0)
