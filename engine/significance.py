"""Paired bootstrap resampling (Koehn 2004) as sacreBLEU's ``paired-bs`` test does it, for every corpus metric
whose score is computed from statistics per sentence summed over the corpus: sacreBLEU's BLEU and chrF,
EVALB's bracketing F1 (matched, gold and test brackets), accuracy (right, all). A task says how its outputs
become such statistics (``Task.measures``); everything here is the metric's business no further.

The resampling is sacreBLEU's (``sacrebleu/significance.py``, 2.x), step for step, so that BLEU and chrF give
its figures to the last digit: the same ``numpy.random.default_rng(seed).choice`` draws of sentence indices
(one draw shared by both systems: the test is paired), the statistics of each resample summed in float32,
the 95% interval of the resampled scores from their 1/40 and 39/40 order statistics, and its p-value. Both
systems may be several runs (seeds): a resample's score is then the mean over the runs of their scores on the
same sentences, and the observed score the mean of their corpus scores (one run: sacreBLEU's test)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .errors import DataError, TbuildError

SAMPLES = 1000  # sacreBLEU's resamples for paired-bs (PairedTest's default for "bs")
SEED = 12345  # sacreBLEU's seed (its SACREBLEU_SEED default)
LEVEL = 0.05  # what "significant" means in reports: p below it


@dataclass(frozen=True)
class Measure:
    """A corpus metric as statistics per sentence of the ``sentences`` it is scored on: ``stats`` turns the
    outputs (one line each, as an evaluation keeps them) into an array of one row per sentence, and ``score`` a
    sum of such rows into the score. ``key`` is the metric's name in an evaluation record and a study's
    objective (``bleu``, ``f1``, ``accuracy``)."""

    name: str
    key: str
    sentences: int
    stats: Callable[[list[str]], np.ndarray]
    score: Callable[[Sequence[float]], float]

    def statistics(self, outputs: list[str], where: str = "the outputs") -> np.ndarray:
        """The outputs' statistics, one row per sentence; outputs of another number of sentences are refused."""
        if len(outputs) != self.sentences:
            raise DataError(f"{where}: {len(outputs)} outputs for {self.sentences} sentences; evaluate both "
                            "systems on the same split")
        return np.asarray(self.stats(outputs)).reshape(len(outputs), -1) if outputs else np.zeros((0, 1))


def accuracy_measure(gold: list[list[str]], items: Callable[[str], list[str]] = str.split) -> Measure:
    """Accuracy in % (items labelled right over all items) as statistics per sentence (right, items): a tagger's
    words (``gold``: each sentence's tags; an output line: its tags, space-separated) or a classifier's lines
    (one label each, ``items`` giving the line whole)."""

    def stats(outputs: list[str]) -> np.ndarray:
        rows = []
        for n, (want, line) in enumerate(zip(gold, outputs, strict=True), 1):
            got = items(line)
            if len(got) != len(want):
                raise DataError(f"output {n}: {len(got)} labels for {len(want)} gold ones")
            rows.append((sum(g == w for g, w in zip(got, want, strict=True)), len(want)))
        return np.array(rows)

    def score(summed: Sequence[float]) -> float:
        return 100.0 * float(summed[0]) / float(summed[1]) if summed[1] else 0.0

    return Measure("accuracy", "accuracy", len(gold), stats, score)


@dataclass(frozen=True)
class Spread:
    """Resampled scores summed up as sacreBLEU does: their mean and the half-width ``ci`` of the 95% interval
    (``mean ± ci``), and the interval's ends (``lower``, ``upper``)."""

    mean: float
    ci: float
    lower: float
    upper: float

    def to_json(self) -> dict:
        return {"mean": self.mean, "ci": self.ci, "lower": self.lower, "upper": self.upper}


def spread(scores: np.ndarray) -> Spread:
    """The mean and 95% interval of resampled scores: the order statistics 1/40 in from each end (sacreBLEU's
    ``estimate_ci``, whose mean is taken over the sorted scores)."""
    ordered = np.sort(scores)
    low = len(ordered) // 40
    lower, upper = float(ordered[low]), float(ordered[len(ordered) - low - 1])
    return Spread(float(ordered.mean()), 0.5 * (upper - lower), lower, upper)


def p_value(system: np.ndarray, baseline: np.ndarray, observed: float) -> float:
    """sacreBLEU's paired bootstrap p-value: the resampled absolute differences, centred on their mean (the null
    hypothesis of no difference), that exceed the observed absolute difference, counted with one added to
    both counts (``(c + 1) / (n + 1)``, as MultEval does). One case departs from sacreBLEU: two systems that
    score the same on every resample (the same outputs) get 1, where sacreBLEU's strict ``>`` would give
    ``1 / (n + 1)``, "significant", to a system compared with itself."""
    differences = np.abs(system - baseline)
    if observed == 0 and not differences.any():
        return 1.0
    exceeding = int(np.sum(differences - differences.mean() > abs(observed)))
    return (exceeding + 1) / (len(differences) + 1)


@dataclass(frozen=True)
class Comparison:
    """One metric of a system against a baseline on the same sentences: each one's score and resampled spread,
    the difference (system − baseline) with its own, and the p-value."""

    metric: str
    system: float
    system_spread: Spread
    baseline: float
    baseline_spread: Spread
    difference: float
    difference_spread: Spread
    p_value: float
    samples: int
    seed: int | None

    @property
    def significant(self) -> bool:
        return self.p_value < LEVEL

    def to_json(self) -> dict:
        return {"metric": self.metric, "score": self.system, **_prefixed("", self.system_spread),
                "against_score": self.baseline, **_prefixed("against_", self.baseline_spread),
                "difference": self.difference, **_prefixed("difference_", self.difference_spread),
                "p_value": self.p_value, "samples": self.samples, "seed": self.seed}


def _prefixed(prefix: str, s: Spread) -> dict:
    return {f"{prefix}{k}": v for k, v in s.to_json().items()}


def draws(sentences: int, samples: int = SAMPLES, seed: int | None = SEED) -> np.ndarray:
    """The sentence indices of every resample (``samples`` rows of ``sentences``), drawn as sacreBLEU draws them."""
    return np.random.default_rng(seed).choice(sentences, size=(samples, sentences), replace=True)


def resampled(measure: Measure, runs: list[np.ndarray], rows: np.ndarray) -> np.ndarray:
    """Each resample's score (``rows``: its sentence indices): the mean over ``runs`` (each a run's statistics,
    one row per sentence) of the score of their float32 sum, as sacreBLEU sums them."""
    wide = [np.asarray(stats, dtype="float32") for stats in runs]
    return np.array([_mean([measure.score(stats[row].sum(0)) for stats in wide]) for row in rows])


def corpus_score(measure: Measure, runs: list[np.ndarray]) -> float:
    """The mean over ``runs`` of each one's score on all sentences (its statistics summed exactly, as sacreBLEU's
    corpus score sums them)."""
    return float(_mean([measure.score(np.asarray(stats).sum(0).tolist()) for stats in runs]))


def _mean(scores: list[float]) -> float:
    """The mean of several runs' scores; one run's score as its metric gives it (sacreBLEU's chrF gives float32
    scores of float32 sums, and its resampled scores stay float32)."""
    return scores[0] if len(scores) == 1 else float(np.mean(scores))


def paired_bootstrap(measure: Measure, system: list[np.ndarray], baseline: list[np.ndarray],
                     samples: int = SAMPLES, seed: int | None = SEED) -> Comparison:
    """``system`` against ``baseline`` (each one or more runs' statistics on the same sentences) by paired
    bootstrap resampling: ``samples`` resamples of the sentences, each scored for both."""
    sizes = {len(stats) for stats in [*system, *baseline]}
    if len(sizes) != 1:
        raise TbuildError(f"{measure.name}: the outputs compared cover different numbers of sentences "
                          f"({', '.join(map(str, sorted(sizes)))}); compare outputs of the same split")
    (sentences,) = sizes
    if sentences == 0 or samples < 1:
        raise TbuildError(f"{measure.name}: paired bootstrap needs sentences and at least one resample "
                          f"({sentences} sentences, {samples} resamples)")
    rows = draws(sentences, samples, seed)
    ours, theirs = resampled(measure, system, rows), resampled(measure, baseline, rows)
    score, against = corpus_score(measure, system), corpus_score(measure, baseline)
    return Comparison(measure.name, score, spread(ours), against, spread(theirs), score - against,
                      spread(ours - theirs), p_value(ours, theirs, score - against), samples, seed)


def signed(x: float) -> str:
    """A difference with its sign: ``+0.85``, ``-1.20``."""
    return f"{x:+.2f}"


def summary(c: Comparison) -> str:
    """One comparison in words: ``BLEU +0.85 (95% interval +0.12 to +1.60, p = 0.012)``."""
    s = c.difference_spread
    return (f"{c.metric} {signed(c.difference)} (95% interval {signed(s.lower)} to {signed(s.upper)}, "
            f"p = {c.p_value:.3f})")
