"""Labels per line (a sequence classifier's data): a split's LABEL<TAB>TEXT lines read with one-line errors
(``corpus.iter_labelled``), and rows of BOS + the text's pieces + EOS, each labelled once (the head pools
the final states: ``tbuild.components.heads``). Labels per word (a tagger's): ``word_labels.py``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tbuild.builder.spec import DataSpec, Spec

from ..errors import DataError
from .corpus import iter_labelled, text_file
from .datasets import ensure_data
from .tokenizer import Tokenizer
from .word_labels import LABEL_OFFSET, TaggedPairs, labels_of

Log = Callable[[str], None]


@dataclass(frozen=True)
class Classified:
    """A split's examples: each one's text and label, and its line in ``file``."""

    texts: list[str]
    labels: list[str]
    lines: list[int]
    file: Path


def read_classified(data: DataSpec, split: str, log: Log = lambda _: None) -> Classified:
    """A split's examples (its file written or checked first); a file with none is an error naming it."""
    ensure_data(data, log, splits=(split,))
    path = text_file(data, split)
    out = Classified([], [], [], path)
    for number, label, text in iter_labelled(path, f"data.{split}"):
        out.texts.append(text)
        out.labels.append(label)
        out.lines.append(number)
    if not out.texts:
        raise DataError(f"data.{split}: no LABEL<TAB>TEXT lines in {path}")
    return out


def text_rows(tok: Tokenizer, texts: list[str], max_positions: int | None) -> list[list[int]]:
    """Each text's source row: BOS (the position ``pooling: first`` reads), its pieces, EOS (the tokenizer's
    ids); cut to the model's ``max_positions`` (EOS kept last) when longer."""
    bos, eos = tok.special.ids("bos"), tok.special.stop
    rows = [[bos, *ids, eos] for ids in tok.encode(texts)]
    if max_positions is None:
        return rows
    return [row if len(row) <= max_positions else row[:max_positions - 1] + [eos] for row in rows]


def encode_classified(spec: Spec, split: str, tok: Tokenizer, log: Log, *,
                      max_length: int | None = None) -> TaggedPairs:
    """A split as ``Pairs``: ``text_rows`` → a one-position target row holding the label (+ LABEL_OFFSET,
    as a tagger's). A label outside the model's labels is an error naming the file and line.
    ``max_length``: examples with more pieces (BOS and EOS counted) are dropped (training)."""
    data = read_classified(spec.data, split, log)
    index = {label: i for i, label in enumerate(labels_of(spec))}
    src, tgt, dropped = [], [], 0
    rows = text_rows(tok, data.texts, spec.model.max_positions)
    for label, row, line in zip(data.labels, rows, data.lines, strict=True):
        if label not in index:
            raise DataError(f"data.{split}: {data.file} line {line}: label {label!r} is not one of the model's "
                            f"{len(index)} labels (model.head.labels)")
        if max_length is not None and len(row) > max_length:
            dropped += 1
            continue
        src.append(row)
        tgt.append([index[label] + LABEL_OFFSET])
    if not src:
        raise DataError(f"data.{split}: every example is longer than data.max_length ({max_length}) pieces")
    log(f"data.{split}: {len(src)} examples from {data.file}"
        + (f"; dropped {dropped} longer than {max_length} pieces" if dropped else ""))
    return TaggedPairs(src, tgt)
