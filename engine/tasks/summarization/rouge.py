"""ROUGE-1, ROUGE-2 and ROUGE-L F1 (Lin 2004) with Google's reference implementation, the ``rouge-score``
library: its tokenizer (lowercased, alphanumeric tokens, Porter-stemmed past three letters) and its
n-gram and longest-common-subsequence F-measures, one per output and reference. A corpus score is the mean of
the outputs' F1 (×100), as ``rouge-score``'s aggregator averages them (its bootstrap left to
``engine/significance.py``); the same F1 per output are the statistics of paired bootstrap (``Measure``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib.metadata import version

import numpy as np
from rouge_score import rouge_scorer, tokenizers

from ...significance import Measure
from .declaration import METRICS

HEADLINE = "rouge_l"  # the headline: first of the measures, the metric of a sweep's table


class WordCachedTokenizer(tokenizers.Tokenizer):
    """``rouge-score``'s default tokenizer with stemming, its tokens of each whitespace-separated word
    remembered: the library lowercases, turns every run of other characters than ``a-z0-9`` into a space and
    splits on spaces, so a text's tokens are its words' tokens end to end (the stemmer, the slow part, then
    runs once per distinct word)."""

    def __init__(self) -> None:
        self.default = tokenizers.DefaultTokenizer(use_stemmer=True)
        self.word = lru_cache(maxsize=1 << 18)(self.default.tokenize)

    def tokenize(self, text: str) -> list[str]:
        return [token for word in text.split() for token in self.word(word)]


@cache
def scorer() -> rouge_scorer.RougeScorer:
    """One scorer of the three metrics (``rougeL``: the summary's LCS as one sequence, no sentence split)."""
    return rouge_scorer.RougeScorer([name for _, name, _ in METRICS], tokenizer=WordCachedTokenizer())


def signature() -> str:
    """How the scores were computed, as a record keeps it."""
    return f"rouge-score {version('rouge-score')}, Porter stemmer, F1 per output averaged over outputs"


def sentence_f1(outputs: Sequence[str], references: Sequence[str]) -> np.ndarray:
    """Each output's F1 against its reference: one row per output, one column per metric (``METRICS``' order)."""
    if len(outputs) != len(references):
        raise ValueError(f"{len(outputs)} outputs for {len(references)} references")
    rouge = scorer()
    rows = [rouge.score(ref, out) for out, ref in zip(outputs, references, strict=True)]
    return np.array([[row[name].fmeasure for _, name, _ in METRICS] for row in rows]).reshape(len(rows), len(METRICS))


@dataclass(frozen=True)
class Rouge:
    """A corpus's ROUGE F1 (×100): the mean over its outputs."""

    rouge1: float
    rouge2: float
    rouge_l: float

    @classmethod
    def of(cls, outputs: Sequence[str], references: Sequence[str]) -> Rouge:
        f1 = sentence_f1(outputs, references)
        means = 100.0 * f1.mean(axis=0) if len(f1) else np.zeros(len(METRICS))
        return cls(*(float(m) for m in means))

    def to_json(self) -> dict[str, float]:
        return {"rouge1": self.rouge1, "rouge2": self.rouge2, "rouge_l": self.rouge_l}


def rouge_measures(references: list[str]) -> list[Measure]:
    """ROUGE-L, ROUGE-1 and ROUGE-2 F1 against ``references`` as statistics per output (its F1 and a count of
    one), scored as 100 × their sum over the count: the mean a corpus score is. The headline first."""
    column = {key: i for i, (key, _, _) in enumerate(METRICS)}

    def measure(key: str, name: str) -> Measure:
        def stats(outputs: list[str]) -> np.ndarray:
            f1 = sentence_f1(outputs, references)[:, column[key]]
            return np.stack([f1, np.ones_like(f1)], axis=1)

        def score(summed: Sequence[float]) -> float:
            return 100.0 * float(summed[0]) / float(summed[1]) if summed[1] else 0.0

        return Measure(name, key, len(references), stats, score)

    ordered = sorted(METRICS, key=lambda m: m[0] != HEADLINE)
    return [measure(key, name) for key, _, name in ordered]
