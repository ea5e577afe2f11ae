"""Labels per word (a tagger's data): a split's words and tags read with one-line errors, and the rows that
predict each word's tag at its first subword piece (the usual practice: the loss is taken there only) or at
its last (``model.head.piece: last``; ``word_piece`` and ``word_row``, the one word → piece map). The label
set is fitted from the training split (``model.head.labels: from_data``) by the tagging task
(``tasks/tagging.py``). Labels per line (a classifier's): ``line_labels.py``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from tbuild.builder.spec import DataSpec, Spec
from tbuild.components.specs.head import Piece
from tbuild.components.specs.special import Specials

from ..errors import DataError
from .corpus import iter_parallel, split_files
from .datasets import ensure_data
from .pairs import Pairs
from .tokenizer import Tokenizer

Log = Callable[[str], None]

LABEL_OFFSET = 1  # label j is stored as j + 1 in a tagged row: NO_LABEL (0) marks a position with no label
NO_LABEL = 0


class TaggedPairs(Pairs):
    """A tagger's encoded sentences: ``src`` rows are word pieces + EOS, ``tgt`` rows as long, a label at
    each word's first (or last) piece and NO_LABEL elsewhere. A row's target length is its labels (its words),
    so the trainer normalises the loss and counts tokens per word, as validation does."""

    @cached_property
    def tgt_lengths(self) -> np.ndarray:
        return np.fromiter((sum(1 for t in row if t != NO_LABEL) for row in self.tgt), dtype=np.int64,
                           count=len(self.tgt))


@dataclass(frozen=True)
class Tagged:
    """A split's sentences: each one's words and tags (as many), and the tags file's line of each."""

    words: list[list[str]]
    tags: list[list[str]]
    lines: list[int]
    tags_file: Path


def read_tagged(data: DataSpec, split: str, log: Log = lambda _: None) -> Tagged:
    """A split's words and tags (its files written or checked first); empty line pairs are skipped. A word
    count that differs from the tag count is an error naming the file and line."""
    ensure_data(data, log, splits=(split,))
    words_file, tags_file = split_files(data, split)
    out = Tagged([], [], [], tags_file)
    for n, (line_words, line_tags) in enumerate(iter_parallel(words_file, tags_file, f"data.{split}"), 1):
        w, t = line_words.split(), line_tags.split()
        if len(w) != len(t):
            raise DataError(f"data.{split}: {tags_file} line {n}: {len(t)} tags for the {len(w)} words of "
                            f"{words_file} line {n}")
        if w:
            out.words.append(w)
            out.tags.append(t)
            out.lines.append(n)
    if not out.words:
        raise DataError(f"data.{split}: no sentences in {words_file} and {tags_file}")
    return out


def labels_of(spec: Spec) -> list[str]:
    """The fitted spec's label set (model.head.labels)."""
    labels = spec.model.output_head.label_set()
    if not isinstance(labels, list):
        raise DataError("model.head.labels is not fitted: train the run first (tbuild train fits it to the data)")
    return labels


def word_pieces(tok: Tokenizer, sentences: list[list[str]]) -> list[list[list[int]]]:
    """Each sentence's words as subword ids, word by word (sentencepiece never joins two words into one
    piece, so these are the pieces of the whole line); a word gives at least one piece."""
    flat = tok.encode([w for words in sentences for w in words])
    out, i = [], 0
    for words in sentences:
        out.append(flat[i:i + len(words)])
        i += len(words)
    return out


def word_piece(spec: Spec) -> Piece:
    """Which of each word's pieces holds its label (``model.head.piece``, first unless a token_classification
    head says last): resolved here alone, for training, validation, evaluation, decoding, serving and export."""
    return spec.model.output_head.word_piece()


def word_bos(spec: Spec) -> bool:
    """Whether a sentence's row starts with BOS (``model.head.bos``: an imported BERT's or RoBERTa's tagger)."""
    return spec.model.output_head.word_bos()


def word_row(pieces: list[list[int]], piece: Piece, special: Specials, bos: bool = False
             ) -> tuple[list[int], list[int]]:
    """One sentence's source row (BOS where ``bos``, from ``word_bos``; its words' pieces, then EOS: the ids of
    ``special``) and each word's position in it: its first or its last piece (``piece``, from ``word_piece``).
    The one word → piece map: labels are trained, validated, evaluated and read there."""
    src: list[int] = [special.ids("bos")] if bos else []
    at: list[int] = []
    unknown = [special.unk if special.unk is not None else special.fill]
    for ids in pieces:
        ids = ids or unknown  # no word gives no piece (each starts with "▁"); kept aligned regardless
        at.append(len(src) + (len(ids) - 1 if piece == "last" else 0))
        src += ids
    return src + [special.stop], at


def label_rows(pieces: list[list[int]], labels: list[int], piece: Piece, special: Specials, bos: bool = False
               ) -> tuple[list[int], list[int]]:
    """One sentence's source row (``word_row``) and label row, as long: each word's label (+ LABEL_OFFSET) at
    its ``piece`` piece, NO_LABEL (no loss) at its other pieces and at EOS."""
    src, at = word_row(pieces, piece, special, bos)
    tgt = [NO_LABEL] * len(src)
    for position, label in zip(at, labels, strict=True):
        tgt[position] = label + LABEL_OFFSET
    return src, tgt


def encode_tagged(spec: Spec, split: str, tok: Tokenizer, log: Log, *,
                  max_length: int | None = None) -> TaggedPairs:
    """A split as ``Pairs``: word pieces + EOS → labels at each word's first or last piece (``label_rows``,
    ``model.head.piece``). A tag outside the model's labels is an error naming the file and line.
    ``max_length``: sentences with more pieces (EOS counted) are dropped (training)."""
    data = read_tagged(spec.data, split, log)
    index = {label: i for i, label in enumerate(labels_of(spec))}
    src, tgt, dropped, piece = [], [], 0, word_piece(spec)
    for tags, pieces, line in zip(data.tags, word_pieces(tok, data.words), data.lines, strict=True):
        unknown = next((t for t in tags if t not in index), None)
        if unknown is not None:
            raise DataError(f"data.{split}: {data.tags_file} line {line}: tag {unknown!r} is not one of the "
                            f"model's {len(index)} labels (model.head.labels)")
        s, t = label_rows(pieces, [index[x] for x in tags], piece, tok.special, word_bos(spec))
        if max_length is not None and len(s) > max_length:
            dropped += 1
            continue
        src.append(s)
        tgt.append(t)
    if not src:
        raise DataError(f"data.{split}: every sentence is longer than data.max_length ({max_length}) pieces")
    log(f"data.{split}: {len(src)} sentences, {sum(map(len, data.words))} words from {data.tags_file.parent}"
        + (f"; dropped {dropped} longer than {max_length} pieces" if dropped else ""))
    return TaggedPairs(src, tgt)
