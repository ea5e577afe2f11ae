"""Parsing (§6.3) as a task: a translation whose outputs are linearized trees (the treebank data set). Its
decoding keeps each output a well-formed tree over the input's words (``data.dataset.well_formed``), its
outputs are repaired into trees, validation and ``tbuild evaluate`` score them with EVALB's bracketing F1
(COLLINS.prm), and ``--diagnose`` says where the points go."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tbuild.builder.spec import Spec

from ...data.datasets import read_split
from ...data.treebank import gold_file
from ...data.trees import read_treebank
from ...decoding.native import NativeEngine, load_native_engine
from ...decoding.request import DecodeRequest
from ...errors import DataError
from ..base import EvalCall, Log, Report, Table
from ..registry import register_task
from ..translation import Translation, examples
from ..validation import ValidScorer
from .evalb import collins, evalb, read_lines
from .evaluation import describe_repairs, evaluate_parsing, nbest_trees, style_of, to_trees, tree_rule_for
from .lexical import output_text

if TYPE_CHECKING:
    from ...data.tokenizer import Tokenizer
    from ...decoding.engines import Engine
    from ...device.policy import Policy
    from ...run.directory import EvalRecord, Run
    from ...significance import Measure


@dataclass
class ParseScorer(ValidScorer):
    """Validation of a parser: its outputs decoded as well-formed trees, read as trees over their lines'
    words and (metric f1) scored by EVALB against the gold trees, with each gold tree's tags put back."""

    tags: list[list[str]] | None = None

    @classmethod
    def of(cls, spec: Spec, tokenizer: Tokenizer, policy: Policy) -> ValidScorer | None:
        select = spec.train.select
        if select.metric != "f1" or spec.data.valid is None:
            return super().of(spec, tokenizer, policy)
        sources = read_split(spec.data, "valid", lambda _: None)[0][: select.lines]
        gold = read_lines(gold_file(spec.data, "valid"))[: select.lines]
        if len(gold) != len(sources):
            raise DataError(f"data.valid: {len(sources)} source lines but {len(gold)} gold trees")
        tags = [next(read_treebank(line, f"gold tree {i}")).tags() for i, line in enumerate(gold, 1)]
        return cls(spec, tokenizer, policy, "f1", sources, gold, tags)

    def step_rule(self, translator: NativeEngine, lines: list[str]) -> Any:
        return tree_rule_for(self.spec, translator, lines)

    def text(self, tokens: list[int], line: str) -> str:
        return output_text(self.tokenizer, style_of(self.spec))(tokens, line)

    def score(self, outputs: list[str]) -> float:
        if self.metric != "f1":
            return super().score(outputs)
        trees, _ = to_trees(outputs, self.sources, self.tags, style_of(self.spec))
        return float(evalb(self.references, trees, collins()).all.to_json()["f1"])


@register_task
class Parsing(Translation):
    """Words → their linearized tree, on the treebank data set (``data.dataset: treebank``)."""

    name = "parsing"
    what = "a parser"
    outputs = "trees"  # eval_SPLIT.trees: the repaired trees, as EVALB scored them
    checks_decoding = False  # its metric is EVALB F1 under a step rule: CPU decoding stays as set

    def valid_scorer(self, spec: Spec, tokenizer: Tokenizer, policy: Policy) -> Any:
        return ParseScorer.of(spec, tokenizer, policy)

    def step_rule(self, spec: Spec, translator: Engine, lines: list[str]) -> Any:
        return tree_rule_for(spec, translator, lines)

    def output_lines(self, run: Run, translator: Engine, request: DecodeRequest, lines: list[str], results: list,
                     notify: Log) -> list[str] | None:
        """Each output repaired into a tree over exactly its line's words (the N best as ``i ||| tree |||
        score``)."""
        form = style_of(run.spec)
        nbest, repairs = nbest_trees(results, lines, output_text(translator.tokenizer, form), form)
        out_lines = []
        for i, trees in enumerate(nbest):
            if request.nbest == 1:
                out_lines.append(trees[0][0] if trees else "")
            else:
                out_lines.extend([f"{i} ||| {tree} ||| {score:.4f}" for tree, score in trees]
                                 or [f"{i} |||  ||| 0.0000"])
        notify(f"parsing: {repairs.summary()}")
        return out_lines

    def study_record(self, run: Run, average: bool) -> EvalRecord:
        translator = load_native_engine(run, average=0 if average else None, quantization=run.spec.decode.quantization)
        record, _, _, trees, _ = evaluate_parsing(run, translator, split="valid")
        self.keep_outputs(run, "valid", trees)
        return record

    def measures(self, run: Run, call: EvalCall) -> list[Measure]:
        """EVALB's bracketing F1 over all sentences (COLLINS.prm or ``call.params``) against the gold trees."""
        from .evalb import read_params
        from .evaluation import f1_measure, gold_lines

        params = read_params(call.params) if call.params is not None else None
        return [f1_measure(gold_lines(run, call.split, call.src, call.ref)[2], params)]

    def scored(self, run: Run, translator: NativeEngine, decoder: Engine | None, call: EvalCall,
               after_batch: Callable[[], None]) -> Report:
        """EVALB's figures (COLLINS.prm or ``call.params``) and the repairs; writes eval_SPLIT.json, the
        repaired trees (eval_SPLIT.trees) and EVALB's full report (eval_SPLIT.evalb)."""
        from ...files import atomic_write
        from .evalb import read_params

        params = call.params
        result, sources, gold, tests, scored = evaluate_parsing(
            run, translator, engine=decoder, split=call.split, src=call.src, ref=call.ref,
            params=read_params(params) if params is not None else None,
            params_name=str(params) if params else "COLLINS.prm", after_batch=after_batch)
        report = examples(("[dim]src[/] ", "[dim]gold[/]", "[bold]test[/]"), zip(sources, gold, tests, strict=True),
                          call.show)
        table = Table(f"{run.spec.name} on {result.split} ({result.sentences} sentences, {result.weights}, EVALB "
                      f"{result.params})", ("metric", "all", f"len<={result.cutoff}"), right=(1, 2))
        for name, key in (("Bracketing F1", "f1"), ("Bracketing recall", "recall"),
                          ("Bracketing precision", "precision"), ("Complete match", "complete_match"),
                          ("Average crossing", "average_crossing")):
            table.add(name, f"{result.all[key]:.2f}", f"{result.short[key]:.2f}")
        for name, key in (("Sentences", "sentences"), ("Error sentences", "error_sentences"),
                          ("Skipped sentences", "skipped_sentences")):
            table.add(name, str(result.all[key]), str(result.short[key]))
        report += [table, f"repairs: {describe_repairs(result.repairs)}",
                   f"perplexity {result.perplexity:.2f} (teacher-forced on the linearized gold trees); "
                   f"{result.sentences_per_second:.1f} sentences/s (beam {result.beam}, α {result.alpha}, "
                   f"{result.precision}, {result.decode_seconds:.1f} s)"]
        base = run.dir.eval_file(result.split).with_suffix("")
        self.keep_outputs(run, result.split, tests)
        atomic_write(base.with_suffix(".evalb"), scored.report().encode())
        run.dir.write_eval(result)
        report.append(f"[dim]wrote {base}.json, {base.name}.trees, {base.name}.evalb[/]")
        if call.diagnose:
            report += diagnosis(run, translator, gold, tests, scored, base)
        return report


def diagnosis(run: Run, translator: NativeEngine, gold: list[str], tests: list[str], scored: Any,
              base: Path) -> Report:
    """``--diagnose``: where the points go (``diagnosis.py``); writes eval_SPLIT.diagnosis.json."""
    import json

    from ...files import atomic_write
    from .diagnosis import diagnose

    found = diagnose(run, translator, gold, tests, scored)
    every = (0, 1, 2, 3, 4)
    lengths = Table("F1 by sentence length (words)", ("length", "sentences", "F1", "right-branching F1",
                                                      "complete match"), right=every)
    for b in found["by_length"]:
        lengths.add(b["bin"], str(b["sentences"]), *("–" if b[k] is None else f"{b[k]:.2f}"
                                                      for k in ("f1", "floor_f1", "complete_match")))
    tokens = Table("Teacher-forced accuracy by gold token kind", ("kind", "tokens", "exact %", "same kind %"),
                   right=every)
    for kind, a in found["token_accuracy"].items():
        tokens.add(kind, str(a["tokens"]), f"{a['exact']:.2f}", f"{a['move']:.2f}")
    s = found["spans"]
    atomic_write(base.with_suffix(".diagnosis.json"), json.dumps(found, indent=1).encode())
    return [lengths, tokens,
            f"output constituents: {s['right']} right, {s['wrong_label']} wrong label, {s['wrong_length']} right "
            f"start and label but wrong number of words, {s['other']} other; right-branching floor F1 "
            f"{found['floor']['all']:.2f} (all), {found['floor']['short']:.2f} (short)",
            f"[dim]wrote {base.name}.diagnosis.json[/]"]
