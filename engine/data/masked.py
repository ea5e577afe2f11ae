"""A masked LM's rows (model.head masked_lm; Devlin et al. 2019 §3.1 "Task #1: Masked LM"): each line's pieces
+ EOS as the source, some of them hidden, and a label row as long holding the original piece (+ LABEL_OFFSET)
at each hidden position and NO_LABEL elsewhere: a tagger's label rows (``word_labels.py``), so the trainer's loss,
validation and ``evaluate_loss`` take them unchanged, the loss at the chosen positions only.

Static masking (BERT's original data: the corpus duplicated with different masks), chosen over masks drawn
per epoch because the trainer's data path needs nothing new: the training split is ``copies`` rows per
line, row r being copy r // lines of line r % lines, and each row's masks are drawn from its own generator
seeded by (seed, split, copy, line). The rows are masked when a batch asks for them (``MaskedLines.padded``),
so memory holds the lines once, and a killed run resumes on exactly the rows it would have seen."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property

import numpy as np

from tbuild.builder.spec import MaskingSpec, Spec
from tbuild.components.specs.head import MASK_PIECE

from ..errors import DataError
from .corpus import split_paths
from .datasets import read_split
from .tokenizer import Tokenizer
from .word_labels import LABEL_OFFSET, NO_LABEL

Log = Callable[[str], None]

SPLIT_KEYS = {"train": 0, "valid": 1, "test": 2}  # a split's part of each row's seed


def masking_of(spec: Spec) -> MaskingSpec:
    """data.masking, BERT's defaults where the spec gives none."""
    return spec.data.masking or MaskingSpec()


def mask_id(tok: Tokenizer) -> int:
    """The tokenizer's [MASK] piece (a control symbol, which no text encodes to); an error naming the file
    where it has none (a tokenizer not trained for a masked LM)."""
    i = int(tok.sp.piece_to_id(MASK_PIECE))
    if not tok.sp.is_control(i) or tok.sp.id_to_piece(i) != MASK_PIECE:
        raise DataError(f"{tok.path} has no {MASK_PIECE} control piece, which a masked LM hides pieces with: leave "
                        "data.tokenizer.model unset so that the run trains one with it")
    return i


def regular_ids(tok: Tokenizer) -> np.ndarray:
    """The ids a chosen piece may be replaced with at random: every piece but the special and control ones
    (pad, unk, bos, eos, [MASK]) and unused ones."""
    sp = tok.sp
    return np.array([i for i in range(tok.vocab_size)
                     if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i))], dtype=np.int64)


def chosen_count(candidates: np.ndarray, rate: float) -> np.ndarray:
    """How many of a row's ``candidates`` pieces are chosen: rate × candidates rounded half up, at least one
    (none in a row with no candidate), as BERT's create_pretraining_data does."""
    return np.where(candidates > 0, np.maximum(1, np.floor(rate * candidates + 0.5)), 0).astype(np.int64)


def mask_row(ids: np.ndarray, rng: np.random.Generator, masking: MaskingSpec, never: tuple[int, ...],
             regular: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One row (pieces + EOS) hidden as BERT §3.1 does: ``chosen_count`` of its positions chosen at random
    among those holding a piece (never one of ``never``: pad, bos, eos, then [MASK], whose id is the last),
    each replaced by [MASK] with probability ``masking.mask``, by a random regular piece with
    ``masking.random``, kept otherwise. Returns the source row and the label row: the original piece +
    LABEL_OFFSET at each chosen position, NO_LABEL elsewhere."""
    src, tgt, mask = ids.copy(), np.full_like(ids, NO_LABEL), never[-1]
    candidates = np.flatnonzero(~np.isin(ids, never))
    k = int(chosen_count(np.array([len(candidates)]), masking.rate)[0])
    if k == 0:
        return src, tgt
    chosen = rng.permutation(candidates)[:k]
    u, random = rng.random(k), regular[rng.integers(len(regular), size=k)]
    tgt[chosen] = ids[chosen] + LABEL_OFFSET
    src[chosen] = np.where(u < masking.mask, mask, np.where(u < masking.mask + masking.random, random, ids[chosen]))
    return src, tgt


class MaskedLines:
    """A split's lines as a masked LM's rows (a ``BatchSource``): ``copies`` rows per line, row r copy
    r // lines of line r % lines, masked when asked for (``mask_row``, seeded by (seed, split, copy,
    line)). A row's target length is its chosen positions, so the loss and the token counts are per
    hidden piece."""

    def __init__(self, rows: list[list[int]], *, masking: MaskingSpec, seed: int, split: str, copies: int,
                 never: tuple[int, ...], regular: np.ndarray) -> None:
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        self.offsets = np.concatenate(([0], np.cumsum(lengths)))
        self.tokens = np.fromiter((t for row in rows for t in row), dtype=np.int64, count=int(lengths.sum()))
        self.lengths, self.lines, self.copies = lengths, len(rows), copies
        self.masking, self.seed, self.split_key = masking, seed, SPLIT_KEYS[split]
        self.never, self.regular = never, regular  # ids never hidden: special ones, [MASK] last
        self._last: tuple[bytes, dict[str, list[np.ndarray]]] | None = None  # the rows of the last batch asked for

    def __len__(self) -> int:
        return self.lines * self.copies

    @cached_property
    def src_lengths(self) -> np.ndarray:
        return np.tile(self.lengths, self.copies)

    @cached_property
    def tgt_lengths(self) -> np.ndarray:
        special = np.isin(self.tokens, self.never)
        candidates = self.lengths - np.add.reduceat(special, self.offsets[:-1]) if self.lines else self.lengths
        return np.tile(chosen_count(candidates, self.masking.rate), self.copies)

    def row(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """Row ``index``'s source and label rows (``mask_row``, with its own seeded generator)."""
        copy, line = divmod(int(index), self.lines)
        rng = np.random.default_rng([self.seed % 2**63, self.split_key, copy, line])
        return mask_row(self.tokens[self.offsets[line]:self.offsets[line + 1]], rng, self.masking, self.never,
                        self.regular)

    def padded(self, indices: np.ndarray, side: str, pad: int) -> np.ndarray:
        """(B, longest) ids of ``side``: the hidden source rows or their label rows, right-padded (both
        sides of one batch are masked once)."""
        key = np.asarray(indices, dtype=np.int64).tobytes()
        if self._last is None or self._last[0] != key:
            made = [self.row(i) for i in indices]
            self._last = (key, {"src": [s for s, _ in made], "tgt": [t for _, t in made]})
        rows = self._last[1][side]
        out = np.full((len(rows), max(map(len, rows), default=0)), pad, dtype=np.int64)
        for r, ids in enumerate(rows):
            out[r, :len(ids)] = ids
        return out


def line_rows(tok: Tokenizer, lines: list[str], max_positions: int | None) -> list[list[int]]:
    """Each line's source row before masking: its pieces with what the vocabulary adds around a source
    (tbuild's: EOS after them); cut to ``max_positions`` (what is added after kept last)."""
    rows = [tok.special.wrap(ids) for ids in tok.encode(lines)]
    _, after = tok.special.around("source")
    if max_positions is None:
        return rows
    return [row if len(row) <= max_positions else row[:max_positions - len(after)] + after for row in rows]


def encode_masked(spec: Spec, split: str, tok: Tokenizer, log: Log, *, max_length: int | None = None) -> MaskedLines:
    """A split of a masked LM's text as ``MaskedLines``: the training split in ``data.masking.copies`` masked
    copies (lines with more than ``max_length`` pieces, EOS counted, dropped), validation and test once; the
    masks' seed is data.masking.seed, else train.seed. Its lines are masked, never sampled: data.tokenizer.sampling
    is refused."""
    if spec.data.tokenizer.sampling is not None:
        raise DataError("data.tokenizer.sampling: a masked LM's training lines are masked copies, not sampled "
                        "encodings; remove data.tokenizer.sampling (data.masking.copies varies them)")
    _, lines = read_split(spec.data, split, log)
    rows, dropped = line_rows(tok, lines, spec.model.max_positions), 0
    if max_length is not None:
        kept = [row for row in rows if len(row) <= max_length]
        rows, dropped = kept, len(rows) - len(kept)
    if not rows:
        raise DataError(f"data.{split}: every line is longer than data.max_length ({max_length}) pieces")
    masking = masking_of(spec)
    copies = masking.copies if split == "train" else 1
    seed = spec.train.seed if masking.seed is None else masking.seed
    never = (*sorted({i for i in (tok.special.pad, tok.special.bos, tok.special.eos) if i is not None}), mask_id(tok))
    out = MaskedLines(rows, masking=masking, seed=seed, split=split, copies=copies, never=never,
                      regular=regular_ids(tok))
    log(f"data.{split}: {len(rows):,} lines from {', '.join(map(str, split_paths(spec.data, split)))}"
        + (f" in {copies} masked copies" if copies > 1 else ", masked once")
        + f" ({int(out.tgt_lengths.sum()):,} pieces to predict, {masking.rate:.0%} of each line's)"
        + (f"; dropped {dropped} longer than {max_length} pieces" if dropped else ""))
    return out
