"""Grapheme-to-phoneme conversion as a task: a translation (the same encoder-decoder over source-target pairs,
its batching, beam search and decoding) from a word's letters to its phones, declared with ``task: g2p`` or
claimed by the ``cmudict`` data set, served at its own ``/phonemize`` (``endpoint.py``). Validation may select
on the phone or word error rate (``train.select.metric``: per, wer; lower is better), ``tbuild evaluate``
reports both (``rates.py``), and ``evaluate --against``, sweeps and studies compare them per word. ``tbuild
decode`` and the server take plain words and spell them as the model reads them (``cmudict.spelled``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from tbuild.builder.spec import Spec

from ...decoding.native import NativeEngine
from ...decoding.request import DecodeRequest
from ..base import DecodeCall, EvalCall, Report, Table
from ..registry import register_task
from ..translation import Translation, examples, scored_references
from ..validation import ValidScorer
from .cmudict import spelled
from .declaration import RATES
from .endpoint import Phonemize
from .rates import Rates, rate_measures
from .record import PhonesRecord, card_results

if TYPE_CHECKING:
    from ...data.tokenizer import Tokenizer
    from ...decoding.engines import Engine
    from ...decoding.precision_record import CheckMetric
    from ...device.policy import Policy
    from ...run.card import TaskCard
    from ...run.directory import Run
    from ...significance import Measure


@dataclass
class RateScorer(ValidScorer):
    """Validation on the phone or word error rate (``train.select.metric`` per or wer) of the decoded validation
    words against their phones; the other metrics as a translation's."""

    def score(self, outputs: list[str]) -> float:
        if self.metric not in RATES:
            return super().score(outputs)
        return getattr(Rates.of(outputs, self.references), self.metric)


def spell_input(data: bytes) -> bytes:
    """``tbuild decode``'s input with each line's word (its first tab-separated column) spelled as the model reads
    it; a line that is not UTF-8 is left for the reader to report."""
    lines = []
    for line in data.split(b"\n"):
        try:
            word, tab, rest = line.decode("utf-8").partition("\t")
        except UnicodeDecodeError:
            lines.append(line)
            continue
        lines.append((spelled(word) + tab + rest).encode())
    return b"\n".join(lines)


@register_task
class GraphemeToPhoneme(Translation):
    """A word → its pronunciation, a phone sequence, by an encoder-decoder (``task: g2p``)."""

    name = "g2p"
    what = "a grapheme-to-phoneme model"
    headline = ("per", "PER")
    scores = tuple(RATES)

    def valid_scorer(self, spec: Spec, tokenizer: Tokenizer, policy: Policy) -> Any:
        return RateScorer.of(spec, tokenizer, policy)

    def check_metric(self, spec: Spec) -> CheckMetric:
        """The decoding check compares precisions by an error rate (lower is better): ``train.select``'s, else
        PER."""
        from ...decoding.precision_record import CheckMetric

        key = spec.train.select.metric if spec.train.select.metric in RATES else "per"
        return CheckMetric(lambda hyps, refs: getattr(Rates.of(hyps, refs), key), higher=False)

    def decode(self, runs: list[Run], call: DecodeCall) -> list[str]:
        """Each input word's phones (the words spelled first)."""
        read = call.read
        return super().decode(runs, replace(call, read=lambda: spell_input(read())))

    def endpoint(self, engine: Engine, spec: Spec, batch_tokens: int, max_tokens: int) -> Phonemize:
        return Phonemize(engine, spec, batch_tokens, max_tokens)

    def card(self, run: Run) -> TaskCard:
        from ...run.card import TaskCard

        return TaskCard("text2text-generation", "converting {source} words to their phones", "pronunciations",
                        card_results)

    def measures(self, run: Run, call: EvalCall) -> list[Measure]:
        """PER and WER per word against the split's phones (or ``--ref``'s)."""
        return rate_measures(scored_references(run, call))

    def split_record(self, run: Run, translator: NativeEngine, split: str,
                     after_batch: Callable[[], None] = lambda: None) -> tuple[PhonesRecord, list[str]]:
        return phonemized(run, translator, None, EvalCall(split=split), after_batch)

    def scored(self, run: Run, translator: NativeEngine, decoder: Engine | None, call: EvalCall,
               after_batch: Callable[[], None]) -> Report:
        """PER and WER of the outputs, the perplexity of the references and the decoding's speed; writes
        eval_SPLIT.json and the outputs (eval_SPLIT.out)."""
        report: Report = []
        record, hyps = phonemized(run, translator, decoder, call, after_batch, report)
        table = Table(f"{run.spec.name} on {record.split} ({record.sentences} words, {record.weights}, "
                      f"{record.engine} engine)", ("metric", "score", "note"), right=(1,))
        table.add("PER", f"{record.per:.2f}", "phone error rate, %: edit distance over the reference phones")
        table.add("WER", f"{record.wer:.2f}", "word error rate, %: words with any phone wrong")
        table.add("perplexity", f"{record.perplexity:.2f}", "per target phone, teacher-forced on the references")
        table.add("words/s", f"{record.sentences_per_second:.1f}",
                  f"beam {record.beam}, α {record.alpha}, {record.precision}, {record.decode_seconds:.1f} s")
        report.append(table)
        kept = self.keep_outputs(run, record.split, hyps)
        report.append(f"[dim]wrote {run.dir.write_eval(record)}, {kept.name}[/]")
        return report


def phonemized(run: Run, translator: NativeEngine, decoder: Engine | None, call: EvalCall,
               after_batch: Callable[[], None], report: Report | None = None) -> tuple[PhonesRecord, list[str]]:
    """The split (or ``--src``/``--ref``, spelled words and phones) decoded as a translation's evaluation decodes
    it, scored by PER and WER; ``report`` gets the first ``call.show`` examples."""
    from ...decoding.evaluation import evaluate

    decoded, sources, references, hyps = evaluate(run, translator, engine=decoder, split=call.split, src=call.src,
                                                  ref=call.ref, after_batch=after_batch,
                                                  request=DecodeRequest.of(run.spec.decode))
    if report is not None:
        report += examples(("[dim]word[/]", "[dim]ref[/] ", "[bold]hyp[/] "),
                           (("".join(s.split()), r, h) for s, r, h in zip(sources, references, hyps, strict=True)),
                           call.show)
    return PhonesRecord.of(decoded, Rates.of(hyps, references)), hyps
