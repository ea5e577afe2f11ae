"""A source line longer than the model's positions, translated in pieces as deployed translators do: split after
sentence ends where that is enough, else between words, else within a word (a run of digits, say); each piece
as long as fits, the pieces translated in one call with the other lines, and their best translations joined by a
space (``Pieces``). ``/translate`` names the lines it split in its response (``TranslateResponse.split``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..decoding.search import Hypothesis

Fits = Callable[[str], bool]  # a text's source row fits the model's positions

_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])\s+")  # whitespace after a sentence's last mark


def split_to_fit(line: str, fits: Fits) -> list[str]:
    """``line`` as consecutive pieces that each fit, as few as the greedy rule gives: whole sentences first,
    then words, then characters. A single character that does not fit is still a piece of its own (the engine
    then truncates it with a warning, as ``tbuild decode`` does)."""
    if fits(line):
        return [line]
    return _pack(_SENTENCE_END.split(line), " ", fits, lambda s: _pack(s.split(), " ", fits, _characters(fits)))


def _pack(units: list[str], sep: str, fits: Fits, smaller: Callable[[str], list[str]]) -> list[str]:
    """Consecutive ``units`` joined by ``sep`` into pieces that fit, each as long as fits; a unit that does not
    fit alone is split by ``smaller``."""
    pieces: list[str] = []
    current = ""
    for unit in units:
        wider = f"{current}{sep}{unit}" if current else unit
        if fits(wider):
            current = wider
            continue
        if current:
            pieces.append(current)
        current = unit if fits(unit) else ""
        if not current:
            *whole, current = smaller(unit)
            pieces += whole
    return pieces + [current] if current else pieces


def _characters(fits: Fits) -> Callable[[str], list[str]]:
    def split(word: str) -> list[str]:
        """``word`` cut into its longest prefixes that fit (binary search on the length, at least one character)."""
        pieces = []
        while word:
            low, high = 1, len(word)
            while low < high:
                middle = (low + high + 1) // 2
                low, high = (middle, high) if fits(word[:middle]) else (low, middle - 1)
            pieces.append(word[:low])
            word = word[low:]
        return pieces

    return split


@dataclass(frozen=True)
class Pieces:
    """A split line's result: each piece's n-best list, in the line's order."""

    results: list[list[Hypothesis]]

    def best(self, decode: Callable[[list[int]], str]) -> tuple[str, float]:
        """The pieces' best translations joined by a space, and their scores summed (a piece with no output adds
        nothing)."""
        best = [hyps[0] for hyps in self.results if hyps]
        return " ".join(text for h in best if (text := decode(h.tokens))), sum(h.score for h in best)


def grouped(results: list[list[Hypothesis]], counts: list[int]) -> list[list[Hypothesis] | Pieces]:
    """Each line's result from its pieces' (``counts[i]`` consecutive n-best lists of ``results``): a line of
    one piece its n-best list, a split line its ``Pieces``."""
    out: list[list[Hypothesis] | Pieces] = []
    start = 0
    for count in counts:
        lists = results[start: start + count]
        start += count
        out.append(lists[0] if count == 1 else Pieces(lists))
    return out
