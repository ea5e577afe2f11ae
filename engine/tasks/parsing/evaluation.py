"""Decode and score a parsing run (§6.3, Table 4): each output repaired into a tree over its input
words, then EVALB with COLLINS.prm (or a given parameter file) against the gold trees."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tbuild.builder.spec import Spec, TreebankDataset

from ...data.datasets import read_split
from ...data.linearize import Repair, TreeForm, linearize, repair
from ...data.pairs import Pairs
from ...data.treebank import gold_file
from ...data.trees import read_treebank
from ...decoding.engines import Engine
from ...decoding.native import NativeEngine, encode_sources
from ...decoding.request import DecodeRequest, Hooks
from ...decoding.search import Hypothesis
from ...errors import DataError
from ...loss import evaluate_loss
from ...run.directory import EvalRecord, Run
from ...significance import Measure
from .constrained import WellFormed, tree_rule
from .evalb import Evalb, Params, Status, Totals, collins, evalb, read_lines
from .lexical import output_text


def is_parsing(spec: Spec) -> bool:
    """Whether a run parses (its data set is the treebank) rather than translates."""
    return isinstance(spec.data.dataset, TreebankDataset)


def style_of(spec: Spec) -> TreeForm:
    """How a run writes its trees as tokens: ``data.dataset.linearization`` (the leaves) and ``order``."""
    dataset = spec.data.dataset
    return TreeForm(dataset.linearization, dataset.order) if isinstance(dataset, TreebankDataset) else TreeForm()


def tree_rule_for(spec: Spec, decoder: Engine, lines: list[str]) -> Callable[[list[int]], WellFormed] | None:
    """``translate(step_rule=...)`` keeping a parsing run's outputs well-formed trees over ``lines``' words
    (``data.dataset.well_formed``); None for a translation run or free decoding."""
    dataset = spec.data.dataset
    if not isinstance(dataset, TreebankDataset) or not dataset.well_formed:
        return None
    policy = getattr(decoder, "policy", None)
    return tree_rule(decoder.tokenizer, dataset.linearization, lines, policy.device if policy else "cpu",
                     dataset.order)


@dataclass
class Repairs:
    """How many outputs needed repair, and the fixes summed over all of them."""

    outputs: int = 0
    repaired: int = 0
    fixes: Repair = field(default_factory=Repair)

    def add(self, fix: Repair) -> None:
        self.outputs += 1
        self.repaired += fix.needed
        self.fixes.add(fix)

    def summary(self) -> str:
        return describe_repairs(self.to_json())

    def to_json(self) -> dict:
        return {"outputs": self.outputs, "repaired": self.repaired, **self.fixes.counts()}


def describe_repairs(counts: dict) -> str:
    """``12 of 245 outputs repaired into trees (unclosed 5, leaves added 3)`` from ``Repairs.to_json()``."""
    how = ", ".join(f"{name.replace('_', ' ')} {n}" for name, n in counts.items()
                    if name not in ("outputs", "repaired") and n)
    return f"{counts['repaired']} of {counts['outputs']} outputs repaired into trees" + (f" ({how})" if how else "")


def to_trees(outputs: list[str], sources: list[str], tags: list[list[str]] | None = None,
             form: TreeForm = TreeForm()) -> tuple[list[str], Repairs]:
    """One bracketed tree per source line (an empty line for an empty source): each decoded output,
    written in ``form``, repaired into a tree over exactly that line's words, with ``tags`` (gold) or the
    predicted ones."""
    counts = Repairs()
    trees = []
    for i, (output, source) in enumerate(zip(outputs, sources, strict=True)):
        words = source.split()
        if not words:
            trees.append("")
            continue
        tree, fix = repair(output, words, tags[i] if tags is not None else None, form.style, form.order)
        counts.add(fix)
        trees.append(str(tree))
    return trees, counts


def nbest_trees(results: list[list[Hypothesis]], sources: list[str], decode: Callable[[list[int], str], str],
                form: TreeForm = TreeForm()) -> tuple[list[list[tuple[str, float]]], Repairs]:
    """Every hypothesis of every line as a repaired tree with its score (``tbuild decode --nbest``);
    ``decode``: the text of a hypothesis's ids for its source line (``lexical.output_text``)."""
    total = Repairs()
    out = []
    for hyps, source in zip(results, sources, strict=True):
        words = source.split()
        trees = []
        for h in hyps:
            tree, fix = repair(decode(h.tokens, source), words, None, form.style, form.order)
            total.add(fix)
            trees.append((str(tree), h.score))
        out.append(trees)
    return out, total


def gold_lines(run: Run, split: str, src: Path | None, ref: Path | None) -> tuple[str, list[str], list[str]]:
    """The split's name, source lines and cleaned gold trees (one per line)."""
    if src is None or ref is None:
        sources, _ = read_split(run.spec.data, split, lambda _: None)
        gold = read_lines(gold_file(run.spec.data, split))
    else:
        sources = read_lines(src)
        try:
            gold = [str(t) for t in read_treebank(ref.read_text(encoding="utf-8"), str(ref))]
        except (OSError, UnicodeDecodeError) as e:
            raise DataError(f"--ref: cannot read {ref} ({e})") from None
        split = src.name
    if len(gold) != len(sources):
        raise DataError(f"{split}: {len(sources)} source lines but {len(gold)} gold trees")
    return split, sources, gold


def evaluate_parsing(run: Run, translator: NativeEngine, *, engine: Engine | None = None, split: str = "test",
                     src: Path | None = None, ref: Path | None = None, params: Params | None = None,
                     params_name: str = "COLLINS.prm", after_batch: Callable[[], None] = lambda: None,
                     ) -> tuple[EvalRecord, list[str], list[str], list[str], Evalb]:
    """Decode the split (or ``src``, gold trees in ``ref``), repair the outputs with the gold tags put
    back, and score them with EVALB; also returns the sources, gold and test trees and EVALB's result."""
    split, sources, gold = gold_lines(run, split, src, ref)
    gold_trees = [next(read_treebank(line, f"gold tree {i}")) for i, line in enumerate(gold, 1)]
    started = time.perf_counter()
    decoder = engine or translator
    results = decoder.translate(sources, DecodeRequest.of(run.spec.decode, step_rule=tree_rule_for(
        run.spec, decoder, sources)), Hooks(after_batch=after_batch))
    seconds = time.perf_counter() - started
    form = style_of(run.spec)
    text = output_text(decoder.tokenizer, form)
    outputs = [text(h[0].tokens, line) if h else "" for h, line in zip(results, sources, strict=True)]
    # gold tags back on the words: EVALB deletes punctuation by each tree's own tags (§6.3 scores brackets)
    tests, repairs = to_trees(outputs, sources, [t.tags() for t in gold_trees], form)
    scored = evalb(gold, tests, params or collins())
    tok = translator.tokenizer
    stop = tok.special.stop
    pairs = Pairs([ids or [stop] for ids in encode_sources(tok, sources, translator.max_source_tokens)],
                  [ids + [stop] for ids in tok.encode([linearize(t, form.style, form.order) for t in gold_trees])])
    ppl = evaluate_loss(translator.model, pairs, batch_tokens=run.spec.train.batch_tokens,
                        label_smoothing=run.spec.train.label_smoothing, policy=translator.policy,
                        special=tok.special)["ppl"]
    result = EvalRecord(
        split=split, sentences=len(sources), weights=translator.weights, params=params_name,
        all=scored.all.to_json(), short=scored.short.to_json(), cutoff=scored.params.cutoff_len,
        repairs=repairs.to_json(), perplexity=ppl, decode_seconds=seconds,
        sentences_per_second=len(sources) / max(seconds, 1e-9), beam=run.spec.decode.beam,
        alpha=run.spec.decode.alpha, precision=decoder.precision, engine=decoder.name)
    return result, sources, gold, tests, scored


def f1_measure(gold: list[str], params: Params | None = None) -> Measure:
    """EVALB's bracketing F1 over all sentences as statistics per sentence (matched, gold and test brackets; zero
    for an error or skipped sentence, which EVALB's totals leave out), scored as EVALB's totals score them."""
    import numpy as np

    def stats(trees: list[str]) -> np.ndarray:
        scored = evalb(gold, trees, params or collins())
        return np.array([(s.match, s.gold, s.test) if s.status == Status.OK else (0, 0, 0) for s in scored.sentences])

    def score(summed: Sequence[float]) -> float:
        return float(Totals(match=int(summed[0]), gold=int(summed[1]), test=int(summed[2])).to_json()["f1"])

    return Measure("F1", "f1", len(gold), stats, score)
