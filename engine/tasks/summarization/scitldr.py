"""The ``scitldr`` data set: SciTLDR-A (Cachola et al. 2020, "TLDR: Extreme Summarization of Scientific
Documents"; Apache-2.0), computer-science paper abstracts each with its authors' one-sentence TLDR (or its
title, a headline), 1,992 / 619 / 618 papers. Each split's JSON-lines file is fetched from the authors'
repository pinned to one commit (size and sha256 checked; a mirror folder offline) and written as the split's
two files, PREFIX.abstract and PREFIX.tldr (or PREFIX.title): one pair a line, the abstract's sentences joined
by a space, the first target (the authors' TLDR where there is one) as the one reference. Torch-free: the task's
declaration declares it, so a spec naming it validates before any engine module is imported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import Field

from tbuild.builder.spec import DATASETS, DatasetSpec

from ...data.download import Pinned, fetch, offline_hint, resolve_mirror, sha256_of
from ...errors import DataError
from .written import Log, Pairs, WrittenPairs, one_line

COMMIT = "5ccad9c00a60ad75c9e04abf7f27d0f53f983b20"  # allenai/scitldr master; the files unchanged since c382848
URL = f"https://raw.githubusercontent.com/allenai/scitldr/{COMMIT}/SciTLDR-Data/SciTLDR-A"
FILES = {  # a spec's split -> the upstream file, its sha256 and size in bytes
    "train": Pinned(f"{URL}/train.jsonl", "b222771d387be585cfdf5ae957b36757138415a352e0a3e3b23f73f87c3b1119", 3155015),
    "valid": Pinned(f"{URL}/dev.jsonl", "3191fa98ccc09521332b7a1cd63b1930be4e8df125a235ccd31e40329709525e", 1124865),
    "test": Pinned(f"{URL}/test.jsonl", "fb42dd6cd4f4a1928ae8a01a189456fbfe994a07e938bd49f68653933f6503c9", 1204107),
}
PAPERS = {"train": 1992, "valid": 619, "test": 618}
MIRROR_NAME = "scitldr"  # $TBUILD_DATA_MIRROR/scitldr/: the .jsonl files, or the repository's SciTLDR-Data/ under it
UPSTREAM_FOLDER = Path("SciTLDR-Data") / "SciTLDR-A"
HINT = offline_hint("SciTLDR-A's train.jsonl, dev.jsonl and test.jsonl")


@DATASETS.declare
class SciTldrDataset(DatasetSpec):
    """SciTLDR-A (a summarization spec's data: ``task: summarization``): a paper's abstract → its TLDR or
    its title; data.train, data.valid and data.test are the file prefixes of the official train, dev and test
    splits, fetched and written when missing."""

    kind: Literal["scitldr"] = "scitldr"
    target: Literal["tldr", "title"] = Field(
        "tldr", description="What an abstract is paired with: tldr (the first TLDR, the authors' where there is "
        "one: extreme summarization) or title (the paper's title: headline generation).")

    @property
    def suffixes(self) -> tuple[str, str]:
        return "abstract", self.target


def pairs(path: Path, target: str) -> Pairs:
    """The (abstract, target) pairs of a SciTLDR-A file: each on one line, its whitespace collapsed."""
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            record = json.loads(line)
            summary = record["title"] if target == "title" else record["target"][0]
            out.append((one_line(" ".join(record["source"])), one_line(summary)))
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise DataError(f"{path}:{n}: not a SciTLDR-A record ({e})") from None
    return out


@DATASETS.register(SciTldrDataset)
class SciTldr(WrittenPairs):
    """Fetches a split's upstream file (into ``downloads/`` beside its prefix) and writes its pairs."""

    name = "SciTLDR-A"

    def pairs(self, split: str, dest: Path, log: Log) -> Pairs:
        found = pairs(self._fetched(split, dest), self.spec.target)  # type: ignore[attr-defined]
        if len(found) != PAPERS[split]:
            raise DataError(f"data.{split}: {len(found)} SciTLDR-A records, expected {PAPERS[split]}")
        return found

    def _fetched(self, split: str, dest: Path) -> Path:
        """The split's upstream file in ``dest/downloads``, fetched (or copied from the mirror) unless there and
        intact."""
        pinned = FILES[split]
        path = dest / "downloads" / pinned.name
        if not (path.is_file() and sha256_of(path) == pinned.sha256):
            mirror = resolve_mirror(self.mirror, MIRROR_NAME)
            if mirror is not None and (mirror / UPSTREAM_FOLDER).is_dir():
                mirror = mirror / UPSTREAM_FOLDER
            fetch(pinned, path, mirror=mirror, progress=self.progress, hint=HINT)
        return path
