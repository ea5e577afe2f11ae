"""Sentence lengths users decode: each synthetic sentence's source length and forced output length drawn
(with a fixed seed) from the pairs of Multi30k's test2016 English→German, so that the synthetic decoding
rows do the work a real test set asks for instead of 64 sentences of exactly 30 tokens.

Lengths are in tokens with EOS counted (source: tokens + EOS; output: the reference's tokens + EOS, the
decoder steps a translation of that length takes). Tokens are counted by a trained run's tokenizer when
one is given (``python -m benchmarks --run RUN``: the pieces the run's model would read and write), else
as word-level tokens: words and punctuation marks (``\\w+|[^\\w\\s]``, as a Moses tokenizer splits them)
× ``WORD_FACTOR``. A subword vocabulary splits some words into several pieces, so the word count is a
lower bound of the pieces; the factor is 1.0 (no guess) and the row says which count it used."""

from __future__ import annotations

import gzip
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tbuild.engine.data.multi30k import fetch_multi30k
from tbuild.engine.data.tokenizer import Tokenizer

SPLIT, SOURCE, TARGET = "test2016", "en", "de"
WORD_FACTOR = 1.0  # pieces per word-level token without a tokenizer (see the module's docstring)
WORDS = re.compile(r"\w+|[^\w\s]")


@dataclass(frozen=True)
class Lengths:
    """Per sentence: source length and forced output length (tokens, EOS counted), and how they were counted."""

    src: list[int]
    out: list[int]
    counted: str  # "words × 1.0" or the tokenizer's file name


def multi30k_folder() -> Path:
    """test2016's two files through the project's fetcher ($TBUILD_DATA_MIRROR, else the download),
    kept in ``$XDG_CACHE_HOME/tbuild/multi30k`` as the tests keep them."""
    dest = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tbuild" / "multi30k"
    fetch_multi30k(dest, langs=(SOURCE, TARGET), splits=(SPLIT,), progress=False)
    return dest


def read_pairs(folder: Path) -> tuple[list[str], list[str]]:
    """test2016's English sources and German references."""
    def lines(lang: str) -> list[str]:
        with gzip.open(folder / f"{SPLIT}.{lang}.gz", "rt", encoding="utf-8") as f:
            return [line.strip() for line in f]
    return lines(SOURCE), lines(TARGET)


def count_tokens(texts: list[str], tokenizer: Tokenizer | None) -> list[int]:
    """Tokens per text, EOS counted."""
    if tokenizer is not None:
        return [len(ids) + 1 for ids in tokenizer.encode(texts)]
    return [max(1, round(len(WORDS.findall(t)) * WORD_FACTOR)) + 1 for t in texts]


def draw(n: int | None, seed: int, tokenizer: Tokenizer | None = None, folder: Path | None = None,
         cap: int | None = None) -> Lengths:
    """``n`` (source, output) length pairs of test2016 drawn with ``seed`` (without replacement while
    ``n`` ≤ the split's size; None: every pair, in a seeded order), each at most ``cap`` tokens."""
    src_texts, tgt_texts = read_pairs(folder or multi30k_folder())
    src, out = np.array(count_tokens(src_texts, tokenizer)), np.array(count_tokens(tgt_texts, tokenizer))
    size = len(src) if n is None else n
    picked = np.random.default_rng(seed).choice(len(src), size=size, replace=size > len(src))
    if cap is not None:
        src, out = np.minimum(src, cap), np.minimum(out, cap)
    counted = tokenizer.path.name if tokenizer is not None else f"words × {WORD_FACTOR}"
    return Lengths(src[picked].tolist(), out[picked].tolist(), counted)
