"""Built-in data sets: each ``data.dataset`` kind has a provider (registered in ``DATASETS`` by its
module) that puts the split files in place, fetched or copied from a mirror, when they are missing."""

from __future__ import annotations

from collections.abc import Callable

from tbuild.builder.schema import DATASETS, DataSpec

from ..errors import DataError
from . import multi30k  # noqa: F401  (registers the multi30k provider)
from .corpus import read_parallel, split_files

Log = Callable[[str], None]


def ensure_data(data: DataSpec, log: Log = lambda _: None) -> None:
    """Let the spec's data set (if any) fetch the files of its splits that are missing."""
    if data.dataset is not None:
        DATASETS.build(data.dataset).ensure(data, log)


def read_split(data: DataSpec, split: str, log: Log) -> tuple[list[str], list[str]]:
    """The source and target lines of a split, its data set's files fetched first if missing."""
    ensure_data(data, log)
    src_path, tgt_path = split_files(data, split)
    source, target = read_parallel(src_path, tgt_path, f"data.{split}")
    if not source:
        raise DataError(f"data.{split}: no lines in {src_path} and {tgt_path}")
    return source, target
