"""Parallel text files: where a split's files are, and reading them with one-line errors."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable
from pathlib import Path

from tbuild.builder.schema import DataSpec, ParallelFiles

from ..errors import DataError

SPLITS = ("train", "valid", "test")
GZIP_MAGIC = b"\x1f\x8b"


def _plain_or_gz(path: str) -> Path:
    """``path`` or ``path.gz``, whichever exists (plain first); the plain name if neither does."""
    plain, gz = Path(path), Path(path + ".gz")
    return gz if not plain.exists() and gz.exists() else plain


def split_files(data: DataSpec, split: str) -> tuple[Path, Path]:
    """The (source, target) files of a split: PREFIX.<lang>[.gz] or explicit ParallelFiles."""
    if split not in SPLITS:
        raise DataError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    value = getattr(data, split)
    if value is None:
        raise DataError(f"data.{split} is not set in the spec")
    if isinstance(value, ParallelFiles):
        return Path(value.source), Path(value.target)
    return _plain_or_gz(f"{value}.{data.source_lang}"), _plain_or_gz(f"{value}.{data.target_lang}")


def read_lines(path: Path, field: str) -> list[str]:
    """All lines of a plain or gzip UTF-8 file, each stripped of surrounding whitespace."""
    if not path.is_file():
        what = "is not a file" if path.exists() else "file not found"
        raise DataError(f"{field}: {what}: {path}")
    lines: list[str] = []
    number = 0
    try:
        with path.open("rb") as raw:
            gzipped = path.suffix == ".gz" or raw.read(2) == GZIP_MAGIC
        opener: Callable = gzip.open if gzipped else open
        with opener(path, "rb") as f:
            # Binary iteration splits on b"\n" only, unlike str.splitlines (which also splits on
            # \x1c, \x85, U+2028 ... and would shift the line alignment of a parallel corpus).
            for number, line in enumerate(f, 1):  # noqa: B007 - number is used after the loop
                lines.append(line.decode("utf-8").strip())
    except UnicodeDecodeError as e:
        raise DataError(f"{field}: {path}: line {number} is not valid UTF-8 (byte {e.start})") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise DataError(f"{field}: {path}: corrupt gzip file after line {number} ({e})") from None
    except OSError as e:
        raise DataError(f"{field}: cannot read {path}: {e.strerror or e}") from None
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:].strip()
    return lines


def read_parallel(src: Path, tgt: Path, field: str) -> tuple[list[str], list[str]]:
    """Read a parallel pair of files; ``field`` (e.g. ``data.train``) names them in errors."""
    source = read_lines(src, f"{field}.source")
    target = read_lines(tgt, f"{field}.target")
    if len(source) != len(target):
        raise DataError(
            f"{field}: line counts differ: {len(source)} lines in {src} but {len(target)} lines in {tgt}"
        )
    return source, target
