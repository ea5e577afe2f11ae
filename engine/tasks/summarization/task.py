"""Summarization as a task: a translation (the same encoder-decoder over source-target pairs, its batching,
beam search and decoding) whose outputs are summaries or headlines, declared with ``task: summarization`` and
served at its own ``/summarize`` (``endpoint.py``). Validation may select on ROUGE (``train.select.metric``:
rouge1, rouge2, rouge_l), ``tbuild evaluate`` reports ROUGE-1/2/L F1 beside the lead-N baseline on the same split
(N chosen on the validation split), and ``evaluate --against``, sweeps and studies compare ROUGE per output."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tbuild.builder.spec import Spec

from ...data.datasets import read_split
from ...decoding.native import NativeEngine
from ...decoding.request import DecodeRequest
from ..base import EvalCall, Report, Table
from ..registry import register_task
from ..translation import Translation, examples, scored_references
from ..validation import ValidScorer
from .declaration import METRICS
from .endpoint import Summarize
from .lead import Lead, choose_lead
from .record import SummaryRecord, card_results
from .rouge import HEADLINE, Rouge, rouge_measures, signature

if TYPE_CHECKING:
    from ...data.tokenizer import Tokenizer
    from ...decoding.engines import Engine
    from ...decoding.precision_record import CheckMetric
    from ...device.policy import Policy
    from ...run.card import TaskCard
    from ...run.directory import Run
    from ...significance import Measure

ROUGE_KEYS = tuple(key for key, _, _ in METRICS)  # train.select.metric's and a study's ROUGE metrics


@dataclass
class RougeScorer(ValidScorer):
    """Validation on ROUGE F1 (``train.select.metric`` rouge1, rouge2 or rouge_l) of the decoded validation
    sources against their summaries; the other metrics as a translation's."""

    def score(self, outputs: list[str]) -> float:
        if self.metric not in ROUGE_KEYS:
            return super().score(outputs)
        return getattr(Rouge.of(outputs, self.references), self.metric)


@register_task
class Summarization(Translation):
    """A document or sentence → its summary or headline, by an encoder-decoder (``task: summarization``)."""

    name = "summarization"
    what = "a summarizer"
    headline = (HEADLINE, "ROUGE-L")
    scores = ROUGE_KEYS

    def valid_scorer(self, spec: Spec, tokenizer: Tokenizer, policy: Policy) -> Any:
        return RougeScorer.of(spec, tokenizer, policy)

    def check_metric(self, spec: Spec) -> CheckMetric:
        """The decoding check compares precisions by ROUGE F1: ``train.select``'s, else ROUGE-L."""
        from ...decoding.precision_record import CheckMetric

        key = spec.train.select.metric if spec.train.select.metric in ROUGE_KEYS else HEADLINE
        return CheckMetric(lambda hyps, refs: getattr(Rouge.of(hyps, refs), key))

    def endpoint(self, engine: Engine, spec: Spec, batch_tokens: int, max_tokens: int) -> Summarize:
        """``/summarize``: a long text truncated, not split (``endpoint.py``)."""
        return Summarize(engine, spec, batch_tokens, max_tokens)

    def card(self, run: Run) -> TaskCard:
        from ...run.card import TaskCard

        return TaskCard("summarization", "summarizing {source} text", "summaries", card_results)

    def measures(self, run: Run, call: EvalCall) -> list[Measure]:
        """ROUGE-L, ROUGE-1 and ROUGE-2 F1 per output against the split's summaries (or ``--ref``'s)."""
        return rouge_measures(scored_references(run, call))

    def split_record(self, run: Run, translator: NativeEngine, split: str,
                     after_batch: Callable[[], None] = lambda: None) -> tuple[SummaryRecord, list[str]]:
        return summarized(run, translator, None, EvalCall(split=split), after_batch)

    def scored(self, run: Run, translator: NativeEngine, decoder: Engine | None, call: EvalCall,
               after_batch: Callable[[], None]) -> Report:
        """ROUGE-1/2/L F1 of the outputs and of the lead-N baseline, the perplexity of the references and the
        decoding's speed; writes eval_SPLIT.json and the outputs (eval_SPLIT.out)."""
        report: Report = []
        record, hyps = summarized(run, translator, decoder, call, after_batch, report)
        table = Table(f"{run.spec.name} on {record.split} ({record.sentences} sentences, {record.weights}, "
                      f"{record.engine} engine)", ("metric", "model", "lead baseline", "note"), right=(1, 2))
        lead = record.lead or {}
        for key, _, name in METRICS:
            table.add(name, f"{getattr(record, key):.2f}", f"{lead[key]:.2f}" if lead else "–", "F1, mean over outputs")
        table.add("perplexity", f"{record.perplexity:.2f}", "",
                  "per target subword, teacher-forced on the references")
        table.add("sentences/s", f"{record.sentences_per_second:.1f}", "",
                  f"beam {record.beam}, α {record.alpha}, {record.precision}, {record.decode_seconds:.1f} s")
        report.append(table)
        report.append(f"lead baseline: the source's first {lead['n']} words (N chosen on the validation split, "
                      f"ROUGE-L {lead['valid_rouge_l']:.2f} there)" if lead
                      else "lead baseline: not scored (no data.valid to choose N on)")
        report.append(f"[dim]ROUGE: {record.rouge_signature}[/]")
        kept = self.keep_outputs(run, record.split, hyps)
        report.append(f"[dim]wrote {run.dir.write_eval(record)}, {kept.name}[/]")
        return report


def summarized(run: Run, translator: NativeEngine, decoder: Engine | None, call: EvalCall,
               after_batch: Callable[[], None], report: Report | None = None) -> tuple[SummaryRecord, list[str]]:
    """The split (or ``--src``/``--ref``) decoded as a translation's evaluation decodes it, scored by ROUGE
    beside the lead-N baseline (N chosen on data.valid); ``report`` gets the first ``call.show`` examples."""
    from ...decoding.evaluation import evaluate

    decoded, sources, references, hyps = evaluate(run, translator, engine=decoder, split=call.split, src=call.src,
                                                  ref=call.ref, after_batch=after_batch,
                                                  request=DecodeRequest.of(run.spec.decode))
    lead = lead_of(run.spec) if run.spec.data.valid is not None else None
    leads = lead.summaries(sources) if lead is not None else None
    lead_rouge = Rouge.of(leads, references) if leads is not None else None
    if report is not None:
        report += examples(("[dim]src[/] ", "[dim]ref[/] ", "[bold]hyp[/] ", "[dim]lead[/]"),
                           zip(sources, references, hyps, leads or [""] * len(sources), strict=True), call.show)
    return SummaryRecord.of(decoded, Rouge.of(hyps, references), signature(), lead, lead_rouge), hyps


def lead_of(spec: Spec) -> Lead:
    """The lead-N baseline of the spec's data: N chosen on its validation split."""
    sources, references = read_split(spec.data, "valid", lambda _: None)
    return choose_lead(sources, references)
