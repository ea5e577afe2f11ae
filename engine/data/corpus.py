"""Parallel text files: where a split's files are, and reading them with one-line errors."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

from tbuild.builder.schema import DataSpec, ParallelFiles

from ..errors import DataError

SPLITS = ("train", "valid", "test")
GZIP_MAGIC = b"\x1f\x8b"


def _plain_or_gz(path: str) -> Path:
    """``path`` or ``path.gz``, whichever exists (plain first); the plain name if neither does."""
    plain, gz = Path(path), Path(path + ".gz")
    return gz if not plain.exists() and gz.exists() else plain


def _split_value(data: DataSpec, split: str) -> str | ParallelFiles:
    if split not in SPLITS:
        raise DataError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    value = getattr(data, split)
    if value is None:
        raise DataError(f"data.{split} is not set in the spec")
    return value


def split_files(data: DataSpec, split: str) -> tuple[Path, Path]:
    """The (source, target) files of a split: PREFIX.<lang>[.gz] (a tagger's PREFIX.words, PREFIX.tags) or
    explicit ParallelFiles."""
    value = _split_value(data, split)
    if isinstance(value, ParallelFiles):
        return Path(value.source), Path(value.target)
    fixed = data.dataset.suffixes if data.dataset is not None else None
    source, target = fixed or (data.source_lang, data.target_lang)
    return _plain_or_gz(f"{value}.{source}"), _plain_or_gz(f"{value}.{target}")


def text_only(data: DataSpec) -> bool:
    """Whether the spec's data is one side of text (a language model's) rather than parallel pairs."""
    return data.dataset is not None and data.dataset.text_only


def classified(data: DataSpec) -> bool:
    """Whether the spec's data is lines each with one label (a classifier's LABEL<TAB>TEXT files)."""
    return data.dataset is not None and data.dataset.labels_per == "line"


def text_file(data: DataSpec, split: str) -> Path:
    """The one file of a text-only or classification split (its path, or PREFIX.<side>[.gz], or
    PREFIX.langid[.gz]; the schema refuses source/target files there)."""
    value = _split_value(data, split)
    assert data.dataset is not None and isinstance(value, str)
    return _plain_or_gz(data.dataset.text_file(value))


def split_paths(data: DataSpec, split: str) -> tuple[Path, ...]:
    """The files a split reads: (source, target), or (text,) for a language model's or a classifier's data."""
    return (text_file(data, split),) if text_only(data) or classified(data) else split_files(data, split)


def iter_split(data: DataSpec, split: str) -> Iterator[tuple[str, str]]:
    """A split's (source, target) lines, streamed; a language model's text gives ("", line) for each
    non-empty line (its data has no source side); a classifier's, (text, label) for each example."""
    if classified(data):
        return ((text, label) for _, label, text in iter_labelled(text_file(data, split), f"data.{split}"))
    if text_only(data):
        return (("", line) for line in iter_lines(text_file(data, split), f"data.{split}") if line)
    return iter_parallel(*split_files(data, split), f"data.{split}")


def iter_lines(path: Path, field: str, strip: str | None = None) -> Iterator[str]:
    """The lines of a plain or gzip UTF-8 file, one at a time, each stripped of surrounding
    whitespace (``strip``: of these characters only; and the first of a byte-order mark); errors name the
    field, file and line."""
    if not path.is_file():
        what = "is not a file" if path.exists() else "file not found"
        raise DataError(f"{field}: {what}: {path}")
    number = 0
    try:
        with path.open("rb") as raw:
            gzipped = path.suffix == ".gz" or raw.read(2) == GZIP_MAGIC
        opener: Callable = gzip.open if gzipped else open
        with opener(path, "rb") as f:
            # Binary iteration splits on b"\n" only, unlike str.splitlines (which also splits on
            # \x1c, \x85, U+2028 ... and would shift the line alignment of a parallel corpus).
            for number, line in enumerate(f, 1):  # noqa: B007 - number is used in the errors
                text = line.decode("utf-8").strip(strip)
                yield text[1:].strip(strip) if number == 1 and text.startswith("\ufeff") else text
    except UnicodeDecodeError as e:
        raise DataError(f"{field}: {path}: line {number} is not valid UTF-8 (byte {e.start})") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise DataError(f"{field}: {path}: corrupt gzip file after line {number} ({e})") from None
    except OSError as e:
        raise DataError(f"{field}: cannot read {path}: {e.strerror or e}") from None


def iter_labelled(path: Path, field: str) -> Iterator[tuple[int, str, str]]:
    """(line number, label, text) of each example of a LABEL<TAB>TEXT file (a classifier's), streamed;
    empty lines are skipped. A line without a tab, with an empty label or with no text is an error naming
    the field, file and line."""
    for number, line in enumerate(iter_lines(path, field, strip=" \r\n"), 1):
        if not line.strip():
            continue
        label, tab, text = line.partition("\t")
        label, text = label.strip(), text.strip()
        problem = ("no tab" if not tab else "an empty label" if not label else "no text after the tab"
                   if not text else None)
        if problem is not None:
            raise DataError(f"{field}: {path} line {number}: {problem} (each line is LABEL<TAB>TEXT)")
        yield number, label, text


def iter_parallel(src: Path, tgt: Path, field: str) -> Iterator[tuple[str, str]]:
    """(source, target) line pairs of a parallel pair of files, streamed; ``field`` (e.g.
    ``data.train``) names them in errors. Files of different lengths are an error with both counts."""
    sources, targets = iter_lines(src, f"{field}.source"), iter_lines(tgt, f"{field}.target")
    n = 0
    while True:
        s, t = next(sources, None), next(targets, None)
        if s is None or t is None:
            break
        n += 1
        yield s, t
    if s is not None or t is not None:  # one file ended first: count what is left of the other
        n_src = n + (s is not None) + sum(1 for _ in sources)
        n_tgt = n + (t is not None) + sum(1 for _ in targets)
        raise DataError(f"{field}: line counts differ: {n_src} lines in {src} but {n_tgt} lines in {tgt}")


def read_parallel(src: Path, tgt: Path, field: str) -> tuple[list[str], list[str]]:
    """Read a parallel pair of files whole (see ``iter_parallel``)."""
    pairs = list(iter_parallel(src, tgt, field))
    return [s for s, _ in pairs], [t for _, t in pairs]
