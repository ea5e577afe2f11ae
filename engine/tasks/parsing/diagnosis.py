"""Where a parser's points go (``tbuild evaluate --diagnose``): F1 by sentence length beside the
right-branching floor, the teacher-forced accuracy of each kind of target token, and the output's
constituents that open at the right word with the right label but span the wrong number of words."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace

import torch
from torch import nn

from tbuild.components.specs.special import Specials

from ...data.batches import collate, token_batches
from ...data.linearize import linearize
from ...data.pairs import Pairs
from ...data.trees import Tree, read_treebank
from ...decoding.native import NativeEngine, encode_sources
from ...device.policy import Policy
from ...run.directory import Run
from .constrained import TreeVocab
from .evalb import Evalb, Params, Totals, collins, evalb
from .evaluation import style_of

BINS = (10, 20, 30, 40, 60)  # upper bounds of the length bins (words); the last bin is everything longer
KINDS = ("open", "close", "leaf", "eos")


def right_branching(tree: Tree) -> Tree:
    """The floor: the sentence's pre-terminals (gold tags) under a right-branching chain of ``X``
    constituents, ``(TOP (X w1 (X w2 … (X wn-1 wn))))``, scored unlabelled."""
    leaves = tree.leaves()
    node: Tree = Tree("X", leaves[-2:])
    for leaf in reversed(leaves[:-2]):
        node = Tree("X", [leaf, node])
    return Tree("TOP", [node])


def floor_score(gold: list[Tree], params: Params | None = None) -> Evalb:
    """EVALB of right-branching trees against ``gold``, unlabelled (``LABELED 0``) with ``params``' other rules."""
    unlabeled = replace(params or collins(), labeled=False)
    return evalb([str(t) for t in gold], [str(right_branching(t)) for t in gold], unlabeled)


def bin_name(i: int) -> str:
    low = BINS[i - 1] + 1 if i else 1
    return f"{low}-{BINS[i]}" if i < len(BINS) else f">{BINS[-1]}"


def by_length(scored: Evalb) -> list[Totals]:
    """EVALB's totals per length bin (``BINS``), from its per-sentence lines."""
    totals = [Totals() for _ in range(len(BINS) + 1)]
    for sentence in scored.sentences:
        totals[next((i for i, top in enumerate(BINS) if sentence.length <= top), len(BINS))].add(sentence)
    return totals


def _kinds(vocab: TreeVocab) -> torch.Tensor:
    """(V,) the kind of each id: 0 open, 1 close, 2 leaf, 3 EOS, 4 anything else."""
    kind = torch.full(vocab.is_open.shape, 4, dtype=torch.long)
    kind[vocab.is_leaf], kind[vocab.is_close], kind[vocab.is_open], kind[vocab.stop] = 2, 1, 0, 3
    return kind


@torch.no_grad()
def token_accuracy(model: nn.Module, pairs: Pairs, vocab: TreeVocab, policy: Policy,
                   batch_tokens: int, special: Specials) -> dict[str, dict[str, float]]:
    """Teacher-forced argmax accuracy per kind of gold token (open bracket, close bracket, leaf, EOS):
    ``exact`` (the very token) and ``move`` (a token of the same kind: opening, closing, placing a leaf
    or ending), with the count of gold tokens of the kind."""
    model.eval()
    kinds = _kinds(vocab)
    exact, move, total = Counter(), Counter(), Counter()
    batches = token_batches(pairs.src_lengths, pairs.tgt_lengths, batch_tokens, seed=0, epoch=0, shuffle=False)
    for batch in batches:
        src, tgt_in, tgt_out, src_pad = (policy.to_device(t) for t in collate(pairs, batch, special))
        with policy.autocast(), policy.attention():
            logits = model(src, tgt_in, src_pad)
        if logits.size(-1) > len(kinds):  # a model vocabulary padded past the tokenizer's: other
            kinds = torch.cat([kinds, kinds.new_full((logits.size(-1) - len(kinds),), 4)])
        pred, gold = logits.argmax(-1).cpu(), tgt_out.cpu()
        keep = gold.ge(0)  # not past the row (batches.IGNORED)
        gold = gold.clamp(min=0)
        gold_kind, pred_kind = kinds[gold], kinds[pred]
        for k, name in enumerate(KINDS):
            mask = keep & gold_kind.eq(k)
            total[name] += int(mask.sum())
            exact[name] += int((mask & pred.eq(gold)).sum())
            move[name] += int((mask & pred_kind.eq(k)).sum())
    return {name: {"tokens": total[name], "exact": 100.0 * exact[name] / max(total[name], 1),
                   "move": 100.0 * move[name] / max(total[name], 1)} for name in KINDS}


def spans(tree: Tree) -> list[tuple[str, int, int]]:
    """(label, first word, one past the last word) of every constituent above the pre-terminals, but the root."""
    out: list[tuple[str, int, int]] = []

    def walk(node: Tree, start: int) -> int:
        if node.is_preterminal:
            return start + 1
        end = start
        for child in node.children:
            if isinstance(child, Tree):
                end = walk(child, end)
        out.append((node.label, start, end))
        return end

    walk(tree, 0)
    return out[:-1]  # the last one closed is the root (TOP)


@dataclass
class SpanErrors:
    """The output's constituents against the gold tree's: right, at the right place with another
    label, opened at the right word with the right label but over the wrong number of words, other."""

    right: int = 0
    wrong_label: int = 0
    wrong_length: int = 0
    other: int = 0

    def add(self, gold: Tree, test: Tree) -> None:
        want = Counter(spans(gold))
        places = {(s, e) for _, s, e in want}
        starts = {(label, s) for label, s, _ in want}
        for span in spans(test):
            if want[span] > 0:
                want[span] -= 1
                self.right += 1
            elif span[1:] in places:
                self.wrong_label += 1
            elif span[:2] in starts:
                self.wrong_length += 1
            else:
                self.other += 1

    def to_json(self) -> dict[str, int]:
        return {"right": self.right, "wrong_label": self.wrong_label, "wrong_length": self.wrong_length,
                "other": self.other}


def span_errors(gold: list[Tree], test: list[Tree]) -> SpanErrors:
    errors = SpanErrors()
    for g, t in zip(gold, test, strict=True):
        errors.add(g, t)
    return errors


def _number(x: float) -> float | None:
    """A figure for JSON: None where EVALB has none (an empty bin)."""
    return None if math.isnan(x) else x


def diagnose(run: Run, translator: NativeEngine, gold: list[str], tests: list[str], scored: Evalb) -> dict:
    """Every figure above for one evaluated split: F1 by length bin for the model and the floor, the
    teacher-forced token accuracy by kind, and the span errors; a JSON-ready dict."""
    gold_trees = [next(read_treebank(line, f"gold tree {i}")) for i, line in enumerate(gold, 1)]
    test_trees = [next(read_treebank(line, f"output tree {i}")) for i, line in enumerate(tests, 1)]
    floor = floor_score(gold_trees, scored.params)
    form, tok = style_of(run.spec), translator.tokenizer
    stop = tok.special.stop
    pairs = Pairs([ids or [stop] for ids in encode_sources(tok, [" ".join(t.words()) for t in gold_trees],
                                                           translator.max_source_tokens)],
                  [ids + [stop] for ids in tok.encode([linearize(t, form.style, form.order) for t in gold_trees])])
    accuracy = token_accuracy(translator.model, pairs, TreeVocab.of(tok, form.style), translator.policy,
                              run.spec.train.batch_tokens, tok.special)
    bins = [{"bin": bin_name(i), "sentences": m.sentences, "f1": _number(m.fmeasure),
             "floor_f1": _number(f.fmeasure), "complete_match": _number(m.complete_match) if m.valid else None}
            for i, (m, f) in enumerate(zip(by_length(scored), by_length(floor), strict=True))]
    return {"by_length": bins, "floor": {"all": floor.all.fmeasure, "short": floor.short.fmeasure},
            "token_accuracy": accuracy, "spans": span_errors(gold_trees, test_trees).to_json()}
