"""The ``cmudict`` data set: the CMU Pronouncing Dictionary (Carnegie Mellon University; BSD-2-Clause), 126,052
English words with their first pronunciation in ARPAbet phones (variants ``word(2)`` left out, comments after
``#`` dropped). The dictionary has no official split: a word's split is fixed by its spelling's sha256 (5% test,
5% valid, 90% train), so it never moves between releases of tbuild. The file is fetched from the authors'
repository pinned to one commit (size and sha256 checked; a mirror folder offline) and each split written as
PREFIX.word (the word's letters, space-separated: one source token a letter) and PREFIX.phones (its phones,
space-separated, with or without stress digits). Torch-free: the task's declaration declares it, so a spec
naming it validates before any engine module is imported."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Literal

from pydantic import Field

from tbuild.builder.spec import DATASETS, DatasetSpec

from ...data.download import Pinned, fetch, offline_hint, resolve_mirror, sha256_of
from ...errors import DataError
from ..summarization.written import Log, Pairs, WrittenPairs

COMMIT = "0f8072f814306c5ee4fbf992ed853601b12c01f9"  # cmusphinx/cmudict master
PINNED = Pinned(f"https://raw.githubusercontent.com/cmusphinx/cmudict/{COMMIT}/cmudict.dict",
                "81917843c7f44ce2b094ac63873c2c7a4cf802040792c455ba3ca406891c3d22", 3618488)
WORDS = {"train": 113333, "valid": 6392, "test": 6327}  # the split's words at COMMIT (checked when written)
MIRROR_NAME = "cmudict"  # $TBUILD_DATA_MIRROR/cmudict/: cmudict.dict (or the repository's files)
HINT = offline_hint("the CMU Pronouncing Dictionary's cmudict.dict")
SPELLING = re.compile(r"[a-z'.\-]+")  # the dictionary's words: letters, apostrophes, hyphens, dots
VARIANT = re.compile(r"\(\d+\)$")  # word(2): a second pronunciation


@DATASETS.declare
class CmudictDataset(DatasetSpec):
    """The CMU Pronouncing Dictionary (a grapheme-to-phoneme spec's data): a word's letters → its phones;
    data.train, data.valid and data.test are the file prefixes of its three splits, written when missing."""

    kind: Literal["cmudict"] = "cmudict"
    stress: bool = Field(True, description="Keep the vowels' stress digits (AH0, OW1: 69 phones); false: the 39 "
                         "ARPAbet phones alone.")

    @property
    def suffixes(self) -> tuple[str, str]:
        return "word", "phones"


def split_of(word: str) -> str:
    """The split a word belongs to, fixed by its spelling: test (5%), valid (5%) or train."""
    bucket = int(hashlib.sha256(word.encode()).hexdigest()[:8], 16) % 100
    return "test" if bucket < 5 else "valid" if bucket < 10 else "train"


def spelled(word: str) -> str:
    """The source form of a word: its letters, lowercased, space-separated (``hello`` → ``h e l l o``)."""
    return " ".join("".join(word.lower().split()))


def entries(path: Path, stress: bool = True) -> dict[str, str]:
    """Each word of a cmudict.dict file with its first pronunciation (phones space-separated; without stress
    digits unless ``stress``), in the file's order."""
    out: dict[str, str] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        word, phones = fields[0], fields[1:]
        if not phones or not SPELLING.fullmatch(VARIANT.sub("", word)):
            raise DataError(f"{path}:{n}: not a cmudict entry (a word, then its phones)")
        if VARIANT.search(word) or word in out:
            continue
        out[word] = " ".join(phones if stress else (p.rstrip("012") for p in phones))
    return out


@DATASETS.register(CmudictDataset)
class Cmudict(WrittenPairs):
    """Fetches cmudict.dict (into ``downloads/`` beside the prefix) and writes a split's pairs."""

    name = "the CMU Pronouncing Dictionary"

    def pairs(self, split: str, dest: Path, log: Log) -> Pairs:
        words = entries(self._fetched(dest), self.spec.stress)  # type: ignore[attr-defined]
        found = [(spelled(w), phones) for w, phones in sorted(words.items()) if split_of(w) == split]
        if len(found) != WORDS[split]:
            raise DataError(f"data.{split}: {len(found)} cmudict words, expected {WORDS[split]}")
        return found

    def _fetched(self, dest: Path) -> Path:
        """cmudict.dict in ``dest/downloads``, fetched (or copied from the mirror) unless there and intact."""
        path = dest / "downloads" / PINNED.name
        if not (path.is_file() and sha256_of(path) == PINNED.sha256):
            fetch(PINNED, path, mirror=resolve_mirror(self.mirror, MIRROR_NAME), progress=self.progress, hint=HINT)
        return path
