"""The ``classification`` data set (a sequence classifier's data, model.kind encoder_only): each split is
one LABEL<TAB>TEXT file, the user's own (source files) or written from Multi30k's en/de/fr sides as a
language-identification task (source multi30k-langid). Reading and encoding a split: ``line_labels.py``."""

from __future__ import annotations

import gzip
import random
from collections.abc import Callable, Sequence
from pathlib import Path

from tbuild.builder.spec import DATASETS, ClassificationDataset, DataSpec

from ..errors import DataError
from ..files import atomic_write
from .corpus import SPLITS, iter_lines, text_file
from .multi30k import LANGS, LOCAL_SPLITS, fetch_multi30k
from .provider import Provider

Log = Callable[[str], None]


def langid_lines(prefix: str) -> list[str]:
    """Every non-empty line of Multi30k's en, de and fr files at ``prefix`` as ``LANG<TAB>sentence``,
    shuffled by a generator seeded with the split's name (the same file on every machine)."""
    lines = [f"{lang}\t{' '.join(line.split())}" for lang in LANGS
             for line in iter_lines(Path(f"{prefix}.{lang}.gz"), f"multi30k {lang}") if line]
    random.Random(f"tbuild-langid:{Path(prefix).name}").shuffle(lines)
    return lines


@DATASETS.register(ClassificationDataset)
class Classification(Provider):
    """The ``classification`` data set: checks that the user's split files exist (source files), or writes
    a split's PREFIX.langid.gz from Multi30k's three sides at PREFIX, fetching them (from the mirror or
    upstream, as the multi30k data set does) when missing (source multi30k-langid)."""

    def __init__(self, spec: ClassificationDataset, *, mirror: Path | None = None,
                 progress: bool | None = None) -> None:
        self.spec, self.mirror, self.progress = spec, mirror, progress

    def ensure(self, data: DataSpec, log: Log, splits: Sequence[str] = SPLITS) -> None:
        for split in splits:
            value = getattr(data, split)
            if value is None or text_file(data, split).is_file():
                continue
            if self.spec.source == "files":
                raise DataError(f"data.{split}: file not found: {text_file(data, split)}")
            self._write_langid(str(value), split, log)

    def _write_langid(self, prefix: str, split: str, log: Log) -> None:
        """PREFIX.langid.gz from PREFIX.{en,de,fr}.gz (fetched first when any is missing)."""
        sides = [Path(f"{prefix}.{lang}.gz") for lang in LANGS]
        if not all(p.is_file() for p in sides):
            dest = sides[0].parent
            log(f"data.{split}: fetching Multi30k's en, de and fr files into {dest}")
            fetch_multi30k(dest, self.mirror, langs=LANGS, progress=self.progress)
            missing = [p for p in sides if not p.is_file()]
            if missing:
                names = ", ".join(f"{s}.<lang>.gz" for s in LOCAL_SPLITS)
                raise DataError(f"data.{split}: {missing[0]} not found; Multi30k provides {names} in {dest}")
        lines = langid_lines(prefix)
        out = Path(f"{prefix}.langid.gz")
        atomic_write(out, gzip.compress("".join(line + "\n" for line in lines).encode(), mtime=0))
        log(f"data.{split}: wrote {out}: {len(lines)} lines, LANG<TAB>sentence for {', '.join(LANGS)}")
