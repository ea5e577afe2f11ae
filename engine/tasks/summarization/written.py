"""What the summarization data sets share: a provider that writes each configured split's pairs as the split's
two files (``PREFIX.<source>``, ``PREFIX.<target>``: one pair a line) when either is missing, from the pairs its
data set reads for the split (``pairs``: fetched and checked)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from tbuild.builder.spec import DatasetSpec, DataSpec, ParallelFiles

from ...data.corpus import SPLITS, split_files
from ...data.provider import Provider
from ...errors import DataError
from ...files import atomic_write

Log = Callable[[str], None]
Pairs = list[tuple[str, str]]


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (line breaks too) made one space."""
    return " ".join(text.split())


class WrittenPairs(Provider):
    """Base of the providers of data sets that are written as pairs; a subclass reads a split's (``pairs``)."""

    name = ""  # the data set's name in messages

    def __init__(self, spec: DatasetSpec, *, mirror: Path | None = None, progress: bool | None = None) -> None:
        self.spec, self.mirror, self.progress = spec, mirror, progress

    def pairs(self, split: str, dest: Path, log: Log) -> Pairs:
        """The (source, target) pairs of ``split`` (train, valid or test), fetched into ``dest`` if need be."""
        raise NotImplementedError

    def ensure(self, data: DataSpec, log: Log, splits: Sequence[str] = SPLITS) -> None:
        for split in splits:
            value = getattr(data, split)
            if value is None:
                continue
            files = split_files(data, split)
            if isinstance(value, ParallelFiles):
                raise DataError(f"data.{split}: the {self.spec.kind} data set writes {files[0].suffix} and "
                                f"{files[1].suffix} files at a prefix: give a prefix, not source and target files")
            if all(p.is_file() for p in files):
                continue
            log(f"data.{split}: {next(p for p in files if not p.is_file())} is missing; writing {self.name}'s "
                f"{split} split")
            found = self.pairs(split, files[0].parent, log)
            for path, side in zip(files, zip(*found, strict=True), strict=True):
                atomic_write(path, "".join(line + "\n" for line in side).encode())
