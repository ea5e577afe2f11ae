"""Phone and word error rates, the measures of grapheme-to-phoneme conversion (Yolchuyeva et al. 2019,
"Transformer based Grapheme-to-Phoneme Conversion", §4): PER, the phones' edit distance (substitutions,
insertions, deletions) to the reference summed over the words, over the reference phones; WER, the share of
words whose phones differ from the reference in any way. Both in %, lower is better; also as statistics per
word for paired bootstrap (``significance.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from ...significance import Measure


def edit_distance(hyp: Sequence[str], ref: Sequence[str]) -> int:
    """Levenshtein distance between two token sequences: the fewest substitutions, insertions and deletions
    turning ``hyp`` into ``ref``."""
    previous = list(range(len(ref) + 1))
    for i, h in enumerate(hyp, 1):
        current = [i]
        for j, r in enumerate(ref, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (h != r)))
        previous = current
    return previous[-1]


def word_statistics(outputs: list[str], references: list[str]) -> np.ndarray:
    """One row per word: its phones' edit distance, its reference phones, whether it is wrong, and one."""
    rows = []
    for hyp, ref in zip(outputs, references, strict=True):
        distance = edit_distance(hyp.split(), ref.split())
        rows.append((distance, len(ref.split()), float(hyp.split() != ref.split()), 1.0))
    return np.asarray(rows, dtype=float).reshape(len(rows), 4)


def _per(summed: Sequence[float]) -> float:
    return 100.0 * float(summed[0]) / float(summed[1]) if summed[1] else 0.0


def _wer(summed: Sequence[float]) -> float:
    return 100.0 * float(summed[2]) / float(summed[3]) if summed[3] else 0.0


@dataclass(frozen=True)
class Rates:
    """PER and WER in % of outputs against references."""

    per: float
    wer: float

    @classmethod
    def of(cls, outputs: list[str], references: list[str]) -> Rates:
        summed = word_statistics(outputs, references).sum(axis=0) if outputs else np.zeros(4)
        return cls(_per(summed), _wer(summed))

    def to_json(self) -> dict[str, float]:
        return asdict(self)


def rate_measures(references: list[str]) -> list[Measure]:
    """PER and WER against ``references`` as statistics per word, PER (the headline) first."""

    def stats(outputs: list[str]) -> np.ndarray:
        return word_statistics(outputs, references)

    return [Measure("PER", "per", len(references), stats, _per), Measure("WER", "wer", len(references), stats, _wer)]
