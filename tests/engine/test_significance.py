"""Paired bootstrap resampling (engine/significance.py): sacreBLEU's own paired test gives the same scores,
p-values and intervals on the same outputs; F1 and accuracy resampled as computed by hand."""

from __future__ import annotations

import random

import numpy as np
import pytest
from sacrebleu.significance import PairedTest

from tbuild.engine.decoding.evaluation import sacrebleu_metrics, translation_measures
from tbuild.engine.errors import DataError, TbuildError
from tbuild.engine.significance import (
    SAMPLES,
    accuracy_measure,
    draws,
    p_value,
    paired_bootstrap,
    resampled,
    spread,
)
from tbuild.engine.tasks.parsing.evaluation import f1_measure

WORDS = ["a", "b", "c", "d", "e", "f", "g", "h", "the", "cat", "dog", "sat", "on", "mat", "."]


def _systems(n: int = 150) -> tuple[list[str], list[str], list[str]]:
    """References and two noisy systems' outputs of them (the second noisier)."""
    rng = random.Random(7)
    refs = [" ".join(rng.choices(WORDS, k=rng.randint(3, 14))) for _ in range(n)]

    def noisy(p: float) -> list[str]:
        return [" ".join(w if rng.random() > p else rng.choice(WORDS) for w in r.split()) for r in refs]

    return refs, noisy(0.3), noisy(0.36)


@pytest.mark.parametrize("samples", [SAMPLES, 300])
def test_bleu_and_chrf_match_sacrebleus_paired_bootstrap(samples: int) -> None:
    refs, system, baseline = _systems()
    for measure, (_, _, metric) in zip(translation_measures(refs), sacrebleu_metrics(), strict=True):
        _, scores = PairedTest([("baseline", baseline), ("system", system)], {"m": metric}, [refs],
                               test_type="bs", n_samples=samples)()
        theirs, ours = next(v for k, v in scores.items() if k != "System")
        c = paired_bootstrap(measure, [measure.statistics(system)], [measure.statistics(baseline)], samples)
        assert (c.system, c.p_value, c.system_spread.mean, c.system_spread.ci) == (
            ours.score, ours.p_value, ours.mean, ours.ci), measure.name
        assert (c.baseline, c.baseline_spread.mean, c.baseline_spread.ci) == (theirs.score, theirs.mean, theirs.ci)
        assert c.difference == c.system - c.baseline and c.samples == samples


def test_the_corpus_score_is_sacrebleus() -> None:
    refs, system, _ = _systems(40)
    for measure, (_, _, metric) in zip(translation_measures(refs), sacrebleu_metrics(), strict=True):
        c = paired_bootstrap(measure, [measure.statistics(system)], [measure.statistics(system)], 10)
        assert c.system == metric.corpus_score(system, [refs]).score


def test_a_system_against_itself_is_no_difference() -> None:
    refs, system, _ = _systems(30)
    (bleu, *_) = translation_measures(refs)
    c = paired_bootstrap(bleu, [bleu.statistics(system)], [bleu.statistics(system)], 100)
    assert c.difference == 0 and c.p_value == 1.0 and not c.significant  # sacreBLEU's strict > gives 1/101
    assert (c.difference_spread.lower, c.difference_spread.upper) == (0, 0)


def test_the_interval_is_the_1_40th_order_statistics() -> None:
    scores = np.arange(40, dtype=float)[::-1]  # 40 resamples: the second lowest and the second highest
    s = spread(scores)
    assert (s.lower, s.upper, s.mean, s.ci) == (1.0, 38.0, 19.5, 18.5)
    assert spread(np.array([3.0, 1.0, 2.0])) == spread(np.array([1.0, 2.0, 3.0]))  # under 40: the extremes
    assert (spread(np.array([3.0, 1.0, 2.0])).lower, spread(np.array([3.0, 1.0, 2.0])).upper) == (1.0, 3.0)


def test_the_p_value_by_hand() -> None:
    # differences 10, 20, 30, 40; centred on their mean 25: -15, -5, 5, 15; above the observed 10: one
    assert p_value(np.array([60.0, 70, 80, 90]), np.array([50.0, 50, 50, 50]), 10.0) == 2 / 5
    assert p_value(np.array([60.0, 70, 80, 90]), np.array([50.0, 50, 50, 50]), -20.0) == 1 / 5  # |observed|
    assert p_value(np.array([50.0, 50]), np.array([50.0, 40]), 0.0) == 2 / 3


def test_accuracy_resampled_by_hand() -> None:
    gold = [["DT", "NN"], ["PRP", "VBZ"], ["NN"]]
    measure = accuracy_measure(gold)
    stats = measure.statistics(["DT NN", "PRP NN", "VB"])  # right, words
    assert stats.tolist() == [[2, 2], [1, 2], [0, 1]]
    rows = np.array([[0, 0, 1], [2, 2, 2], [0, 1, 2]])
    # (2+2+1)/(2+2+2), 0/3, (2+1+0)/(2+2+1)
    assert resampled(measure, [stats], rows) == pytest.approx([500 / 6, 0.0, 60.0])
    # two runs (seeds): each resample's score is their mean
    other = measure.statistics(["DT NN", "PRP VBZ", "NN"])
    assert resampled(measure, [stats, other], rows) == pytest.approx([(500 / 6 + 100) / 2, 50.0, 80.0])
    labels = accuracy_measure([["pos"], ["neg"]], lambda line: [line])
    assert labels.statistics(["pos", "very neg"]).tolist() == [[1, 1], [0, 1]]


def test_f1_resampled_by_hand() -> None:
    gold = ["(TOP (S (NP (D the) (N cat)) (VP (V sat))))", "(TOP (S (NP (N dogs)) (VP (V bark))))"]
    test = ["(TOP (S (NP (D the)) (VP (N cat) (V sat))))", "(TOP (S (NP (N dogs)) (VP (V bark))))"]
    measure = f1_measure(gold)
    stats = measure.statistics(test)
    # matched, gold, test: S[0,3] of S[0,3] NP[0,2] VP[2,3] / S[0,3] NP[0,1] VP[1,3]; all three of the second
    assert stats.tolist() == [[1, 3, 3], [3, 3, 3]]
    assert resampled(measure, [stats], np.array([[0, 1], [0, 0], [1, 1]])) == pytest.approx([400 / 6, 100 / 3, 100])
    c = paired_bootstrap(measure, [stats], [measure.statistics(gold)], 50, seed=3)
    assert c.system == pytest.approx(400 / 6) and c.baseline == 100.0
    rows = draws(2, 50, 3)
    by_hand = [100 * 2 * sum(stats[r, 0]) / (sum(stats[r, 1]) + sum(stats[r, 2])) for r in rows]  # P = R here
    assert sorted(by_hand)[1] == pytest.approx(c.system_spread.lower)


def test_mismatched_outputs_are_one_line() -> None:
    measure = accuracy_measure([["A"], ["B"]], lambda line: [line])
    with pytest.raises(DataError, match="run-2: 3 outputs for 2 sentences"):
        measure.statistics(["A", "B", "C"], "run-2")
    with pytest.raises(TbuildError, match="different numbers of sentences"):
        paired_bootstrap(measure, [np.ones((2, 2))], [np.ones((3, 2))])
    with pytest.raises(DataError, match="output 1: 2 labels for 1 gold ones"):
        accuracy_measure([["NN"]]).statistics(["NN VB"])
