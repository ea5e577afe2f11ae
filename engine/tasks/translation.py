"""Translation (§6.1): an encoder-decoder over source-target pairs, trained on the prepared (memory-mapped)
pairs, validated on the decoded lines' BLEU or chrF (``train.select``), evaluated with sacreBLEU and
perplexity, decoded with beam search or sampling (one run or an ensemble), served at ``/translate`` and
exported as a translator (CTranslate2, Hugging Face). The task every run no other task claims is."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import islice
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from tbuild.builder.spec import Spec
from tbuild.components.specs.graph import with_article

from ..data.joined import for_model
from ..data.pairs import load_pairs
from ..data.prepare import prepared_train
from ..decoding.native import NativeEngine, check_decoding, load_native_engine
from ..decoding.records import one_line
from ..decoding.request import DecodeRequest, Hooks
from ..device.process import configure_process
from ..errors import TbuildError
from .base import (
    DecodeCall,
    DecodeTime,
    DecodeTiming,
    EvalCall,
    Loading,
    Log,
    Report,
    Task,
    quiet_progress,
    scores_table,
)
from .registry import register_task

if TYPE_CHECKING:
    from ..data.batches import BatchSource
    from ..data.tokenizer import Tokenizer
    from ..decoding.engines import Engine
    from ..decoding.precision_record import CheckMetric
    from ..device.policy import Policy
    from ..run.card import TaskCard
    from ..run.directory import EvalRecord, Run, RunDir
    from ..serving.endpoints import Endpoint
    from ..significance import Measure


def examples(labels: tuple[str, ...], rows: Iterable[tuple[str, ...]], show: int) -> Report:
    """The first ``show`` rows as ``evaluate --show`` prints them: each text on one line (``one_line``) after its
    label (rich markup), the text itself never read as markup (a ``[/]`` in a sentence is printed as it is)."""
    return ["".join(f"{label} {escape(one_line(text))}\n" for label, text in zip(labels, row, strict=True))
            for row in islice(rows, show)]


@register_task
class Translation(Task):
    """Source-target pairs through an encoder-decoder (``model.kind: encoder_decoder``)."""

    name = "translation"
    what = "a translator"
    peft_type = "SEQ_2_SEQ_LM"
    commands = ("decode", "evaluate", "serve", "export", "attention", "card")
    times_decoding = True
    checks_decoding = True  # measures its CPU decoding (bf16, int8 logits) once per run on its valid BLEU
    headline = ("bleu", "BLEU")  # the metric of a sweep's table: its key in the record, its name
    scores = ("bleu", "bleu_lowercase", "chrf")  # the record's scores a sweep row keeps (with the perplexity)

    def refuse(self, command: str, spec: Spec) -> TbuildError:
        if command != "generate":
            return super().refuse(command, spec)
        name = spec.name or "this run"
        return TbuildError(f"tbuild {command} continues text with a language model (model.kind decoder_only); "
                           f"{name} is {with_article(spec.model.kind)} translator: use tbuild decode")

    # training ---------------------------------------------------------------------------------------------
    def training_data(self, spec: Spec, tokenizer: Tokenizer, run: RunDir, log: Log
                      ) -> tuple[BatchSource, BatchSource | None]:
        return pairs_data(spec, tokenizer, run, log)

    def prepare(self, spec: Spec, run: RunDir, log: Log, workers: int | None = None) -> Any:
        return prepared_pairs(spec, run, log, workers)

    def valid_scorer(self, spec: Spec, tokenizer: Tokenizer, policy: Policy) -> Any:
        """BLEU, lowercased BLEU or chrF of the decoded validation lines (None for ppl)."""
        from .validation import ValidScorer

        return ValidScorer.of(spec, tokenizer, policy)

    # evaluation -------------------------------------------------------------------------------------------
    def evaluate(self, runs: list[Run], call: EvalCall) -> Report:
        """Decode the split with the command line's engine (a second one only when it differs from the
        float32 native model, whose perplexity of the references is reported beside) and score it."""
        run = runs[0]
        process = configure_process()
        quantization = call.loading.quantization or run.spec.decode.quantization
        self.check_decoding(runs, call.loading, call.notify)
        same = call.loading.engine == "native" and quantization == "float32" and len(runs) == 1
        decoder = None if same or call.load_decoder is None else call.load_decoder()
        translator = load_native_engine(run, checkpoint=call.loading.checkpoint, average=call.loading.average,
                                     device=call.loading.device, notify=call.notify, compiled=call.loading.compiled)
        return self.scored(run, translator, decoder, call, process.after_batch)

    def scored(self, run: Run, translator: NativeEngine, decoder: Engine | None, call: EvalCall,
               after_batch: Callable[[], None]) -> Report:
        """sacreBLEU's BLEU (cased and lowercased, the headline first as ``call.lowercase`` asks), chrF and
        the perplexity of the references, with the signatures; writes eval_SPLIT.json."""
        from ..decoding.evaluation import evaluate

        result, sources, references, hyps = evaluate(run, translator, engine=decoder, split=call.split,
                                                     src=call.src, ref=call.ref, after_batch=after_batch,
                                                     request=DecodeRequest.of(run.spec.decode))
        report = examples(("[dim]src[/]", "[dim]ref[/]", "[bold]hyp[/]"), zip(sources, references, hyps, strict=True),
                          call.show)
        table = scores_table(f"{run.spec.name} on {result.split} ({result.sentences} sentences, {result.weights}, "
                             f"{result.engine} engine)")
        rows = [("BLEU", result.bleu, "sacreBLEU, cased"),
                ("BLEU (lowercased)", result.bleu_lowercase, "sacreBLEU, -lc")]
        for name, score, note in (reversed(rows) if call.lowercase else rows):
            table.add(name, f"{score:.2f}", note)
        table.add("chrF", f"{result.chrf:.2f}", "sacreBLEU chrF2")
        table.add("perplexity", f"{result.perplexity:.2f}", "per target subword, teacher-forced on the references"
                  + ("" if result.engine == "native" else " (native model)"))
        table.add("sentences/s", f"{result.sentences_per_second:.1f}",
                  f"beam {result.beam}, α {result.alpha}, {result.precision}, {result.decode_seconds:.1f} s")
        report.append(table)
        used = decoder or translator
        report.append(f"[dim]decoded in {used.precision}: "
                      f"{used.note if isinstance(used, NativeEngine) else f'the {used.name} engine'}[/]")
        for name, sig in (("BLEU", result.bleu_signature), ("BLEU lowercased", result.bleu_lowercase_signature),
                          ("chrF", result.chrf_signature)):
            report.append(f"[dim]{name} signature: {sig}[/]")
        kept = self.keep_outputs(run, result.split, hyps)
        report.append(f"[dim]wrote {run.dir.write_eval(result)}, {kept.name}[/]")
        return report

    def measures(self, run: Run, call: EvalCall) -> list[Measure]:
        """sacreBLEU's BLEU, lowercased BLEU and chrF of the split's references (or ``--ref``'s)."""
        from ..decoding.evaluation import translation_measures

        return translation_measures(scored_references(run, call))

    def study_record(self, run: Run, average: bool) -> EvalRecord:
        translator = load_native_engine(run, average=0 if average else None, quantization=run.spec.decode.quantization)
        record, hyps = self.split_record(run, translator, "valid")
        self.keep_outputs(run, "valid", hyps)
        return record

    def split_record(self, run: Run, translator: NativeEngine, split: str,
                     after_batch: Callable[[], None] = lambda: None) -> tuple[EvalRecord, list[str]]:
        """``split`` decoded with ``translator`` as the spec's decode section says and scored as ``tbuild
        evaluate`` scores it, nothing printed or written (a study's trial, a sweep's row): its record and outputs."""
        from ..decoding.evaluation import evaluate

        record, _, _, hyps = evaluate(run, translator, split=split, after_batch=after_batch)
        return record, hyps

    def decode_time(self, run: Run, timing: DecodeTiming) -> DecodeTime:
        """The validation sources through `tbuild decode`'s own path (the native engine loaded as it loads
        it: the spec's decode precision and quantization; the spec's decode request and the task's step
        rule; the output lines made), the model loaded once, outside the time."""
        import time

        import torch

        from ..data.datasets import read_split
        from ..decoding.native import load_native
        from ..decoding.records import text_lines

        sources = read_split(run.spec.data, "valid", lambda _: None)[0][:timing.lines]
        translator = load_native([run], average=0 if timing.average else None)
        request = DecodeRequest.of(run.spec.decode)
        request = request.but(step_rule=self.step_rule(run.spec, translator, sources))
        seconds = []
        for _ in range(timing.repeats):
            started = time.perf_counter()
            results = translator.translate(sources, request, Hooks(after_batch=timing.after_batch))
            self.output_lines(run, translator, request, sources, results, lambda _: None) or text_lines(
                translator.tokenizer, results, request.nbest)  # the output text, as `tbuild decode` makes it
            seconds.append(time.perf_counter() - started)
        return DecodeTime(len(sources), seconds, request.beam, request.alpha, request.batch_tokens,
                          translator.precision, torch.get_num_threads(), translator.name)

    # decoding ---------------------------------------------------------------------------------------------
    def decode(self, runs: list[Run], call: DecodeCall) -> list[str]:
        """Each input line's translation (its columns: a target prefix and constraints), or its jsonl
        record, with the command line's engine (several runs: their ensemble)."""
        from ..decoding.records import jsonl_line, text_lines
        from .registry import task_of

        for run in runs[1:]:  # an ensemble's members: translators all
            member = task_of(run.spec)
            if not isinstance(member, Translation):
                raise member.refuse("decode", run.spec)
            member.check("decode", run.spec)
        if call.load_decoder is None:
            raise TbuildError("decoding needs an engine")
        lines, prefixes, constraints = read_input(call)
        request = DecodeRequest.of(runs[0].spec.decode, prefixes=prefixes, constraints=constraints,
                                   format=call.format, align=call.align)
        process = configure_process()
        self.check_decoding(runs, call.loading, call.notify)
        translator = call.load_decoder()
        request = request.but(step_rule=self.step_rule(runs[0].spec, translator, lines))
        with (call.progress or quiet_progress)(len(lines)) as advance:
            results = translator.translate(lines, request, Hooks(call.warn, advance, process.after_batch))
        if request.format == "jsonl":
            tok = translator.tokenizer
            alignments = translator.alignments(lines, results) if request.align else [None] * len(lines)
            return [jsonl_line(tok, line, hyps, a) for line, hyps, a in zip(lines, results, alignments, strict=True)]
        own = self.output_lines(runs[0], translator, request, lines, results, call.notify)
        return [one_line(line) for line in own] if own is not None else text_lines(translator.tokenizer, results,
                                                                                   request.nbest)

    def check_decoding(self, runs: list[Run], loading: Loading, notify: Log) -> None:
        """One run's CPU decoding check, made once and recorded (``decoding/native.py: check_decoding``),
        before the native engine loads it; none for a task whose metric is not its valid BLEU, nor for an
        ensemble (its members decode as their own records say: the ensemble is checked for a shared
        tokenizer before any member is read)."""
        if not self.checks_decoding or loading.engine != "native" or len(runs) != 1:
            return
        run = runs[0]
        check_decoding(run, checkpoint=loading.checkpoint, average=loading.average, device=loading.device,
                       metric=self.check_metric(run.spec),
                       quantization=loading.quantization or run.spec.decode.quantization, notify=notify)

    def check_metric(self, spec: Spec) -> CheckMetric | None:
        """What the decoding check compares precisions by (None: a translation's BLEU, lowercased BLEU or chrF,
        as ``train.select`` says)."""
        return None

    def step_rule(self, spec: Spec, translator: Engine, lines: list[str]) -> Any:
        """What keeps each step's tokens within the task's outputs (None: any token)."""
        return None

    def output_lines(self, run: Run, translator: Engine, request: DecodeRequest, lines: list[str], results: list,
                     notify: Log) -> list[str] | None:
        """The task's own text of the outputs (None: the tokenizer's text of each)."""
        return None

    # serving and export -----------------------------------------------------------------------------------
    def serve(self, run: Run, batch_tokens: int, loading: Loading, notify: Log) -> Endpoint:
        """``/translate`` behind either engine, compiled before the first request when asked."""
        from ..decoding.native import DEFAULT_MAX_SOURCE
        from ..export.engines import load_engine

        self.check_decoding([run], loading, notify)
        loaded = load_engine(run, loading.engine, quantization=loading.quantization, checkpoint=loading.checkpoint,
                             average=loading.average, device=loading.device, notify=notify,
                             compiled=loading.compiled)
        if loading.compiled:  # compile before the first request, which would otherwise wait for it
            notify("compiling the decoder step on warm-up sentences")
            loaded.translate(["A warm-up sentence.", "Two short ones", "and a third, somewhat longer than the others."],
                             DecodeRequest.of(run.spec.decode))
        limit = getattr(loaded, "max_source_tokens", run.spec.model.max_positions or DEFAULT_MAX_SOURCE)
        return self.endpoint(loaded, run.spec, batch_tokens, limit)

    def endpoint(self, engine: Engine, spec: Spec, batch_tokens: int, max_tokens: int) -> Endpoint:
        """The route the loaded engine is served at: ``/translate``."""
        from ..serving.endpoints import Translation as Translate

        return Translate(engine, spec, batch_tokens, max_tokens)

    def card(self, run: Run) -> TaskCard:
        from ..run.card import TRANSLATION

        return TRANSLATION

    def export(self, run: Run) -> str:
        return "translator"


def pairs_data(spec: Spec, tokenizer: Tokenizer, run: RunDir, log: Log) -> tuple[BatchSource, BatchSource | None]:
    """The training pairs, prepared once into memory-mapped arrays, and the validation pairs (a language
    model's: its lines, each an empty source)."""
    valid = load_pairs(spec, "valid", tokenizer, log) if spec.data.valid is not None else None
    return for_model(spec, prepared_train(spec, tokenizer, run, log)), None if valid is None else for_model(spec, valid)


def prepared_pairs(spec: Spec, run: RunDir, log: Log, workers: int | None = None) -> Any:
    """The run's tokenizer (trained if needed) and its training pairs, memory-mapped once."""
    from ..data.tokenizer import prepare_tokenizer

    return prepared_train(spec, prepare_tokenizer(spec, run, log), run, log, workers=workers)


def scored_references(run: Run, call: EvalCall) -> list[str]:
    """The references an evaluation scores against: ``--ref``'s (with ``--src``), else the split's targets."""
    from ..data.corpus import read_parallel
    from ..data.datasets import read_split

    if call.src is not None and call.ref is not None:
        return read_parallel(call.src, call.ref, "--src/--ref")[1]
    return read_split(run.spec.data, call.split, lambda _: None)[1]


def read_input(call: DecodeCall) -> tuple[list[str], list[str] | None, list | None]:
    """The input's lines with their target prefixes and lexical constraints, from its columns or from the
    side files."""
    from ..decoding.native import decode_lines
    from ..decoding.records import read_constraints, read_prefixes, split_columns

    lines, prefixes, constraints = split_columns(decode_lines(call.read(), call.name), call.name)
    if call.prefix_file is not None:
        _no_column("--prefix-file", prefixes, "a prefix column", call, "prefix")
        prefixes = read_prefixes(call.prefix_file.read_bytes(), str(call.prefix_file), len(lines))
    if call.constraints_file is not None:
        _no_column("--constraints-file", constraints, "constraint columns", call, "constraints")
        constraints = read_constraints(call.constraints_file.read_bytes(), str(call.constraints_file), len(lines))
    return lines, prefixes, constraints


def _no_column(option: str, column: object, what: str, call: DecodeCall, kind: str) -> None:
    """Refuse a side file (``option``) when the input already has its ``column``, or when it is missing."""
    path = call.prefix_file if kind == "prefix" else call.constraints_file
    if column is not None:
        raise TbuildError(f"{option}: the input already has {what}")
    if path is None or not path.is_file():
        raise TbuildError(f"{path}: {kind} file not found")
