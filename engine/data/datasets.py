"""Data sets: each ``data.dataset`` kind has a provider (registered in ``DATASETS`` by its module)
whose ``ensure(data, log)`` puts the split files in place, fetched or copied from a mirror, when
they are missing (``files``: checks that they exist)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from tbuild.builder.spec import DATASETS, DataSpec, FilesDataset, TextDataset

from ..errors import DataError
from . import classification, multi30k, tagging, treebank, wmt14  # noqa: F401  (register the built-in data sets' providers)
from .corpus import SPLITS, iter_split, split_paths
from .provider import Provider

Log = Callable[[str], None]


@DATASETS.register(FilesDataset)
class Files(Provider):
    """The ``files`` data set: the user's own files; nothing to fetch, each configured split's two
    files must exist."""

    def __init__(self, spec: FilesDataset, *, mirror: Path | None = None, progress: bool | None = None) -> None:
        self.spec = spec

    def ensure(self, data: DataSpec, log: Log, splits: Sequence[str] = SPLITS) -> None:
        for split in splits:
            if getattr(data, split) is not None:
                missing = [str(p) for p in split_paths(data, split) if not p.is_file()]
                if missing:
                    raise DataError(f"data.{split}: file not found: {' and '.join(missing)}")


@DATASETS.register(TextDataset)
class Text(Files):
    """The ``text`` data set: a language model's own text files, one per split; nothing to fetch, each
    configured split's file must exist."""

    def __init__(self, spec: TextDataset, *, mirror: Path | None = None, progress: bool | None = None) -> None:
        self.spec = spec  # type: ignore[assignment]


def provider_of(data: DataSpec, *, mirror: Path | None = None, progress: bool | None = None) -> Provider:
    """The provider of the spec's data set (``files`` without one)."""
    dataset = data.dataset if data.dataset is not None else FilesDataset()
    return DATASETS.build(dataset, mirror=mirror, progress=progress)


def ensure_data(data: DataSpec, log: Log = lambda _: None, *, splits: Sequence[str] = SPLITS,
                mirror: Path | None = None, progress: bool | None = None) -> None:
    """Let the spec's data set (if any) fetch the missing files of ``splits`` (default: all). ``mirror``:
    a local folder with the data set's files (or a subfolder per data set), used instead of the network
    (default: ``$TBUILD_DATA_MIRROR``); ``progress``: download progress bars on
    stderr (None: when it is a terminal)."""
    if data.dataset is not None:
        DATASETS.build(data.dataset, mirror=mirror, progress=progress).ensure(data, log, splits)


def fetch_data(data: DataSpec, log: Log = lambda _: None, *, mirror: Path | None = None,
               progress: bool | None = None) -> None:
    """``ensure_data`` for ``tbuild data fetch``: a spec without a data set is checked as ``files``."""
    provider_of(data, mirror=mirror, progress=progress).ensure(data, log)


def read_split(data: DataSpec, split: str, log: Log) -> tuple[list[str], list[str]]:
    """The source and target lines of a split, its data set's files for it fetched first if missing (a
    language model's text: empty sources and its non-empty lines)."""
    ensure_data(data, log, splits=(split,))
    pairs = list(iter_split(data, split))
    if not pairs:
        raise DataError(f"data.{split}: no lines in {' and '.join(map(str, split_paths(data, split)))}")
    return [s for s, _ in pairs], [t for _, t in pairs]
