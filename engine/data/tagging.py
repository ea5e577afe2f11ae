"""The ``tagging`` data set (a tagger's data, model.kind encoder_only): each split is PREFIX.words (a
sentence a line, words separated by spaces) and PREFIX.tags (its tags, one per word), written from NLTK's
treebank sample (the trees cleaned as for parsing: -NONE- elements removed) or the user's own files.
Reading and encoding a split: ``word_labels.py``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from tbuild.builder.spec import DATASETS, DataSpec, TaggingDataset

from ..errors import DataError
from ..files import atomic_write
from .corpus import SPLITS, split_files
from .download import fetch, resolve_mirror, sha256_of
from .provider import Provider
from .treebank import HINT, MIRROR_NAME, SAMPLE, SAMPLE_FILES, sample_trees

Log = Callable[[str], None]


@DATASETS.register(TaggingDataset)
class Tagging(Provider):
    """The ``tagging`` data set: writes a split's two files from the treebank sample when either is
    missing (source nltk-sample), or checks that the user's own exist (source files)."""

    def __init__(self, spec: TaggingDataset, *, mirror: Path | None = None, progress: bool | None = None) -> None:
        self.spec, self.mirror, self.progress = spec, mirror, progress

    def ensure(self, data: DataSpec, log: Log, splits: Sequence[str] = SPLITS) -> None:
        for split in splits:
            if getattr(data, split) is None:
                continue
            files = split_files(data, split)
            missing = [p for p in files if not p.is_file()]
            if not missing:
                continue
            if self.spec.source == "files":
                raise DataError(f"data.{split}: file not found: {' and '.join(map(str, missing))}")
            log(f"data.{split}: {missing[0]} is missing; writing the {split} words and tags of NLTK's treebank sample")
            archive = files[0].parent / "downloads" / "treebank.zip"
            if not (archive.is_file() and sha256_of(archive) == SAMPLE.sha256):
                fetch(SAMPLE, archive, mirror=resolve_mirror(self.mirror, MIRROR_NAME), progress=self.progress,
                      hint=HINT)
            trees = list(sample_trees(archive, SAMPLE_FILES[split]))
            atomic_write(files[0], "".join(" ".join(t.words()) + "\n" for t in trees).encode())
            atomic_write(files[1], "".join(" ".join(t.tags()) + "\n" for t in trees).encode())
            log(f"data.{split}: {len(trees)} sentences, {sum(len(t.words()) for t in trees)} words")
