"""The lead-N baseline: a source's first N words as its summary, N chosen where the validation split's ROUGE-L
is highest (the usual extractive floor of headline generation and news summarization: a model that does not
beat it has learnt little beyond copying the start)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .rouge import Rouge

LONGEST = 40  # the largest N tried: longer than any headline or one-sentence summary


def lead(source: str, n: int) -> str:
    """The first ``n`` whitespace-separated words of ``source``."""
    return " ".join(source.split()[:n])


@dataclass(frozen=True)
class Lead:
    """A lead-N baseline: its N and the validation ROUGE it was chosen by."""

    n: int
    valid: Rouge

    def summaries(self, sources: Sequence[str]) -> list[str]:
        return [lead(source, self.n) for source in sources]


def choose_lead(sources: Sequence[str], references: Sequence[str], longest: int = LONGEST) -> Lead:
    """The N in 1..``longest`` (no more than the longest source) whose lead-N summaries of ``sources`` score the
    highest ROUGE-L F1 against ``references``; the smallest N among equals."""
    most = max((len(s.split()) for s in sources), default=1)
    tried = [Lead(n, Rouge.of([lead(s, n) for s in sources], references))
             for n in range(1, max(1, min(longest, most)) + 1)]
    return max(tried, key=lambda found: (found.valid.rouge_l, -found.n))
