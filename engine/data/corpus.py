"""Parallel text files: where a split's files are, and reading them with one-line errors."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tbuild.builder.spec import DataSpec, ParallelFiles

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


def text_file(data: DataSpec, split: str) -> Path:
    """The one file of a text-only or classification split (its path, or PREFIX.<side>[.gz], or
    PREFIX.langid[.gz]; the schema refuses source/target files there)."""
    value = _split_value(data, split)
    assert data.dataset is not None and isinstance(value, str)
    return _plain_or_gz(data.dataset.text_file(value))


def _text_lines(data: DataSpec, split: str) -> Iterator[tuple[str, str]]:
    return (("", line) for line in iter_lines(text_file(data, split), f"data.{split}") if line)


def _labelled_lines(data: DataSpec, split: str) -> Iterator[tuple[str, str]]:
    return ((text, label) for _, label, text in iter_labelled(text_file(data, split), f"data.{split}"))


def _parallel(data: DataSpec, split: str) -> Iterator[tuple[str, str]]:
    return iter_parallel(*split_files(data, split), f"data.{split}")


@dataclass(frozen=True)
class Layout:
    """How a data set lays a split out in files and what the (source, target) pairs read from it hold:
    ``files``: the files a split reads; ``read``: its pairs, streamed; ``unit``: what one is called;
    ``sourced``: whether a pair has a source side (a language model's text has none: ""); ``text``: the
    sides (0 source, 1 target) that are text for the tokenizer to learn (a tagger's tags and a classifier's
    labels are not)."""

    files: Callable[[DataSpec, str], tuple[Path, ...]]
    read: Callable[[DataSpec, str], Iterator[tuple[str, str]]]
    unit: str = "pairs"
    sourced: bool = True
    text: tuple[int, ...] = (0, 1)


PAIRS = Layout(split_files, _parallel)  # two parallel files (a prefix's two languages, or given)
TEXT = Layout(lambda data, split: (text_file(data, split),), _text_lines, "lines", False, (1,))  # one text file
WORD_LABELS = Layout(split_files, _parallel, text=(0,))  # the words and their tags: two parallel files
LINE_LABELS = Layout(TEXT.files, _labelled_lines, "lines", text=(0,))  # one LABEL<TAB>TEXT file: (text, label)


def layout_of(data: DataSpec) -> Layout:
    """The layout the spec's data set declares (``text_only``, ``labels_per``): pairs without one."""
    dataset = data.dataset
    if dataset is None:
        return PAIRS
    if dataset.labels_per is not None:
        return LINE_LABELS if dataset.labels_per == "line" else WORD_LABELS
    return TEXT if dataset.text_only else PAIRS


def split_paths(data: DataSpec, split: str) -> tuple[Path, ...]:
    """The files a split reads: (source, target), or (text,) for a language model's or a classifier's data."""
    return layout_of(data).files(data, split)


def iter_split(data: DataSpec, split: str) -> Iterator[tuple[str, str]]:
    """A split's (source, target) lines, streamed; a language model's text gives ("", line) for each
    non-empty line (its data has no source side); a classifier's, (text, label) for each example."""
    return layout_of(data).read(data, split)


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
