"""A sequence classifier (``model.kind: encoder_only`` with a ``sequence_classification`` head): each input
line's label (its BOS + pieces + EOS pooled by the head, as it was trained: ``data/line_labels.py``); a
split's accuracy beside the majority-class baseline of its training split, and the confusion table."""

from __future__ import annotations

import time
from collections import Counter

from ..data.line_labels import encode_classified, read_classified, text_rows
from ..data.word_labels import LABEL_OFFSET, labels_of
from ..errors import TbuildError
from ..loss import evaluate_loss
from ..run.directory import EvalRecord, Run
from .native import NativeEngine
from .tagger import best_labels


def classify_lines(t: NativeEngine, labels: list[str], lines: list[str], batch_tokens: int = 4000) -> list[str]:
    """Each line's best label (an empty line: an empty string). Lines are text alone: one holding a tab (a
    LABEL<TAB>TEXT example) is an error naming it. Text past the model's positions is cut, as in training."""
    for n, line in enumerate(lines, 1):
        if "\t" in line:
            raise TbuildError(f"line {n} holds a tab: tbuild decode classifies text alone, one input a line "
                              "(for LABEL<TAB>TEXT lines give `cut -f2-` of them)")
    kept = [i for i, line in enumerate(lines) if line.strip()]
    rows = text_rows(t.tokenizer, [lines[i] for i in kept], t.max_output_len)
    out = [""] * len(lines)
    for i, best in zip(kept, best_labels(t, rows, batch_tokens), strict=True):
        out[i] = labels[int(best[0])]
    return out


def majority(train: list[str]) -> str:
    """The most frequent training label (ties: the one seen first): the majority-class baseline's guess."""
    return Counter(train).most_common(1)[0][0]


def confusion(labels: list[str], gold: list[str], predicted: list[str]) -> dict[str, dict[str, int]]:
    """Counts of each (gold, predicted) pair of labels: gold label -> predicted label -> examples, every
    label in both (zeros included), in the model's order."""
    table = {g: dict.fromkeys(labels, 0) for g in labels}
    for g, p in zip(gold, predicted, strict=True):
        table[g][p] += 1
    return table


def evaluate_classifier(run: Run, t: NativeEngine, split: str) -> EvalRecord:
    """The split's accuracy (each line's best label), label perplexity and confusion table, and the
    majority-class baseline's accuracy from the training split; a label outside the model's labels is an
    error naming its file and line."""
    return classify_split(run, t, split)[0]


def classify_split(run: Run, t: NativeEngine, split: str) -> tuple[EvalRecord, list[str]]:
    """``evaluate_classifier``'s record and the label it predicted for each line."""
    spec, started = run.spec, time.perf_counter()
    labels = labels_of(spec)
    pairs = encode_classified(spec, split, t.tokenizer, lambda _: None)
    result = evaluate_loss(t.model, pairs, batch_tokens=spec.train.batch_tokens,
                           label_smoothing=spec.train.label_smoothing, policy=t.policy, special=t.tokenizer.special,
                           offset=LABEL_OFFSET)
    gold = [labels[row[0] - LABEL_OFFSET] for row in pairs.tgt]
    predicted = [labels[int(best[0])] for best in best_labels(t, pairs.src, spec.decode.batch_tokens)]
    right = sum(g == p for g, p in zip(gold, predicted, strict=True))
    guess = majority(read_classified(spec.data, "train").labels)
    return EvalRecord(split=split, sentences=len(pairs), weights=t.weights, accuracy=right / len(gold),
                      baseline_accuracy=sum(g == guess for g in gold) / len(gold), perplexity=result["ppl"],
                      nll=result["nll"], tokens=result["tokens"], confusion=confusion(labels, gold, predicted),
                      seconds=time.perf_counter() - started, precision=t.precision), predicted
