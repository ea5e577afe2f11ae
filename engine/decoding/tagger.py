"""A tagger (``model.kind: encoder_only`` with a ``token_classification`` head): each input word's tag,
read at the word's first or last subword piece (``model.head.piece``, as it was trained, ``data/word_labels.py``);
the token accuracy of a split beside the most-frequent-tag baseline of its training split."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from tbuild.builder.spec import Spec

from ..data.word_labels import (
    LABEL_OFFSET,
    Tagged,
    encode_tagged,
    labels_of,
    read_tagged,
    word_bos,
    word_piece,
    word_pieces,
    word_row,
)
from ..errors import TbuildError
from ..loss import evaluate_loss
from ..run.directory import EvalRecord, Run
from .native import NativeEngine, length_batches, load_native_engine, padded


def load_tagger(run: Run, *, checkpoint: Path | None = None, average: int | None = None, device: str = "auto",
                notify: Callable[[str], None] = lambda _: None) -> NativeEngine:
    """The run's tagger or classifier with its weights, loaded as ``load_native_engine`` loads a translator (the
    same weights choice, device and precision)."""
    return load_native_engine(run, checkpoint=checkpoint, average=average, device=device, notify=notify)


@torch.no_grad()
def tag_lines(t: NativeEngine, spec: Spec, lines: list[str], batch_tokens: int = 4000) -> list[list[str]]:
    """Each line's tags, one per whitespace-separated word (an empty line: none): the head's best label (of
    ``spec``'s labels) at each word's first or last piece (``model.head.piece``, as it was trained). A line
    longer than the model's positions is an error naming it."""
    labels, piece, bos = labels_of(spec), word_piece(spec), word_bos(spec)
    sentences = [line.split() for line in lines]
    rows, starts = [], []
    for n, pieces in enumerate(word_pieces(t.tokenizer, sentences), 1):
        src, at = word_row(pieces, piece, t.tokenizer.special, bos)
        if t.max_output_len is not None and len(src) > t.max_output_len:
            raise TbuildError(f"line {n}: {len(src)} pieces exceed the model's {t.max_output_len} positions "
                              "(model.max_positions)")
        rows.append(src)
        starts.append(at)
    kept = [b for b in range(len(rows)) if starts[b]]
    best = best_labels(t, [rows[b] for b in kept], batch_tokens)
    out: list[list[str]] = [[] for _ in lines]
    for b, scores in zip(kept, best, strict=True):
        out[b] = [labels[int(scores[p])] for p in starts[b]]
    return out


@torch.no_grad()
def best_labels(t: NativeEngine, rows: list[list[int]], batch_tokens: int = 4000) -> list[torch.Tensor]:
    """Each source row's best label id at every position the head scores (a tagger: each piece; a
    sequence classifier: one, the whole row), in the rows' order, batched by length."""
    out: list[torch.Tensor] = [torch.empty(0, dtype=torch.long)] * len(rows)
    t.model.eval()
    for batch in length_batches([len(r) for r in rows], batch_tokens):
        src, pad = (t.policy.to_device(x) for x in padded([rows[b] for b in batch], t.tokenizer.special.fill))
        with t.policy.autocast():
            best = t.model(src, None, pad).argmax(-1).cpu()
        for r, b in enumerate(batch):
            out[b] = best[r]
    return out


@dataclass(frozen=True)
class Baseline:
    """The most frequent tag of each training word; a word never seen in training gets the most frequent
    tag overall (ties: the tag seen first)."""

    by_word: dict[str, str]
    overall: str

    @classmethod
    def of(cls, train: Tagged) -> Baseline:
        counts: dict[str, Counter[str]] = defaultdict(Counter)
        overall: Counter[str] = Counter()
        for words, tags in zip(train.words, train.tags, strict=True):
            for w, tag in zip(words, tags, strict=True):
                counts[w][tag] += 1
                overall[tag] += 1
        return cls({w: c.most_common(1)[0][0] for w, c in counts.items()}, overall.most_common(1)[0][0])

    def accuracy(self, split: Tagged) -> float:
        """The share of the split's words whose tag the baseline guesses."""
        pairs = [(w, tag) for words, tags in zip(split.words, split.tags, strict=True)
                 for w, tag in zip(words, tags, strict=True)]
        return sum(self.by_word.get(w, self.overall) == tag for w, tag in pairs) / max(len(pairs), 1)

    def by_seen(self, split: Tagged, predicted: list[list[str]]) -> tuple[dict, dict]:
        """The split's words seen in training and those not: how many, the share ``predicted`` tags right
        and the share the baseline does (None where a group is empty)."""
        groups: dict[bool, list[tuple[bool, bool]]] = {True: [], False: []}
        for words, tags, guesses in zip(split.words, split.tags, predicted, strict=True):
            for w, tag, guess in zip(words, tags, guesses, strict=True):
                groups[w in self.by_word].append((guess == tag, self.by_word.get(w, self.overall) == tag))
        return tuple({"words": len(g), "accuracy": sum(r for r, _ in g) / len(g) if g else None,
                      "baseline_accuracy": sum(b for _, b in g) / len(g) if g else None}
                     for g in (groups[True], groups[False]))


def evaluate_tagger(run: Run, t: NativeEngine, split: str) -> EvalRecord:
    """The split's token accuracy (each word's best label at its ``model.head.piece`` piece: the label rows
    of ``encode_tagged``) and label perplexity, and the baseline's accuracy from the training split; a tag
    outside the model's labels is an error naming its file and line."""
    return tag_split(run, t, split)[0]


def tag_split(run: Run, t: NativeEngine, split: str) -> tuple[EvalRecord, list[list[str]]]:
    """``evaluate_tagger``'s record and the tags it predicted, one list per sentence."""
    spec, started = run.spec, time.perf_counter()
    labels_of(spec)
    pairs = encode_tagged(spec, split, t.tokenizer, lambda _: None)
    result = evaluate_loss(t.model, pairs, batch_tokens=spec.train.batch_tokens,
                           label_smoothing=spec.train.label_smoothing, policy=t.policy, special=t.tokenizer.special,
                           offset=LABEL_OFFSET)
    baseline, gold = Baseline.of(read_tagged(spec.data, "train")), read_tagged(spec.data, split)
    predicted = tag_lines(t, spec, [" ".join(words) for words in gold.words], spec.train.batch_tokens)
    known, unknown = baseline.by_seen(gold, predicted)
    return EvalRecord(split=split, sentences=len(pairs), weights=t.weights, accuracy=result["accuracy"],
                      baseline_accuracy=baseline.accuracy(gold), known=known, unknown=unknown,
                      perplexity=result["ppl"], nll=result["nll"], tokens=result["tokens"],
                      seconds=time.perf_counter() - started, precision=t.precision), predicted
