"""Tagging (``model.kind: encoder_only`` with a token_classification head, the tagging data set): words and
their tags, one per word, the label read at each word's first or last piece. Its labels are fitted from the
training split (``model.head.labels: from_data``); its examples are encoded in memory; it is evaluated by
its accuracy beside the most-frequent-tag baseline, decoded into tags, served at ``/classify`` and exported
as a token classifier. ``Labels`` is what a tagger, a classifier and a masked LM share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tbuild.builder.spec import Spec

from ..data.word_labels import (
    LABEL_OFFSET,
    encode_tagged,
    labels_of,
    read_tagged,
    word_bos,
    word_piece,
    word_pieces,
    word_row,
)
from ..decoding.native import NativeEngine, decode_lines, load_native_engine
from ..decoding.tagger import load_tagger, tag_lines, tag_split
from ..errors import DataError, TbuildError
from .base import DecodeCall, EvalCall, Loading, Log, Report, Task, scores_table
from .registry import register_task, task_of

if TYPE_CHECKING:
    from ..data.batches import BatchSource
    from ..data.tokenizer import Tokenizer
    from ..run.directory import EvalRecord, Run, RunDir
    from ..serving.endpoints import Endpoint
    from ..significance import Measure


class Labels(Task):
    """An encoder-only model's task: labels predicted over the final encoder states, stored above PAD
    (``LABEL_OFFSET``), its examples encoded in memory (``encode``), evaluated and decoded by one run on
    the native engine."""

    commands = ("evaluate", "decode", "serve", "export")

    def refuse(self, command: str, spec: Spec) -> TbuildError:
        return TbuildError(f"{command} of {spec.model.kind} is not supported yet ({spec.name or 'this run'} is a "
                           "tagger or classifier: tbuild evaluate, decode and inspect take it)")

    def encode(self, spec: Spec, split: str, tok: Tokenizer, log: Log, *, max_length: int | None = None
               ) -> BatchSource:
        """A split's examples as pairs."""
        raise NotImplementedError

    def training_data(self, spec: Spec, tokenizer: Tokenizer, run: RunDir, log: Log
                      ) -> tuple[BatchSource, BatchSource | None]:
        """The examples encoded in memory (no prepared arrays), longer ones than data.max_length dropped."""
        valid = self.encode(spec, "valid", tokenizer, log) if spec.data.valid is not None else None
        return self.encode(spec, "train", tokenizer, log, max_length=spec.data.max_length), valid

    def prepare(self, spec: Spec, run: RunDir, log: Log, workers: int | None = None) -> None:
        raise TbuildError(f"tbuild data prepare memory-maps translation or text pairs; {spec.name} is a tagger or "
                          "classifier (model.kind encoder_only), whose examples tbuild train encodes in memory")

    def label_offset(self, spec: Spec) -> int:
        return LABEL_OFFSET

    def loaded(self, runs: list[Run], call: EvalCall | DecodeCall) -> NativeEngine:
        """The run's model, or several runs' ensemble (``LabelEnsemble``: their label distributions combined as
        ``--combine`` says), loaded on the native engine in float32; --src or another engine refused in one
        line."""
        from ..decoding.native import load_native
        from ..device.process import configure_process

        loading = call.loading
        if isinstance(call, EvalCall) and call.src is not None:
            raise TbuildError(f"{self.what} is evaluated on a split of its data (no --src/--ref)")
        if loading.engine != "native" or loading.quantization not in (None, "float32"):
            raise TbuildError(f"{self.what} runs on the native engine in float32 (no --engine or --quantization)")
        configure_process()
        return load_native(runs, quantization="float32", checkpoint=loading.checkpoint, average=loading.average,
                           device=loading.device, notify=call.notify, weights=loading.member_weights,
                           combine=loading.combine, labels=self.reads)  # type: ignore[return-value]

    def reads(self, spec: Spec) -> object:
        """What the members of an ensemble must share: the task, the labels and where they are read."""
        return task_of(spec).name, labels_of(spec), word_piece(spec), word_bos(spec)

    def decode(self, runs: list[Run], call: DecodeCall) -> list[str]:
        """Each input line's labels (``label_lines``) by the run or the runs' ensemble; an empty line gives
        an empty line."""
        lines = decode_lines(call.read(), call.name)
        return self.label_lines(self.loaded(runs, call), runs[0].spec, lines)

    def label_lines(self, t: NativeEngine, spec: Spec, lines: list[str]) -> list[str]:
        raise NotImplementedError

    def export(self, run: Run) -> str:
        return "graph"

    def starts_with_bos(self, spec: Spec) -> bool:
        return word_bos(spec)

    def parity_rows(self, run: Run, t: NativeEngine) -> list[list[int]]:
        """The rows an export is compared on: the valid split as the model reads it."""
        raise NotImplementedError

    def graph_parity(self, run: Run, to: str, out: Path, loading: Loading, notify: Log) -> Any:
        from ..export.graph_runs import encoder_parity

        return encoder_parity(run, to, out, lambda t: self.parity_rows(run, t), load=self.parity_loader(),
                              checkpoint=loading.checkpoint, average=loading.average, device=loading.device,
                              notify=notify)

    def parity_loader(self) -> Callable[..., NativeEngine]:
        """How the export's peer in tbuild is loaded: a tagger or classifier with its labels."""
        return load_tagger


def fitted(spec: Spec, found: set[str], where: Path, what: str, log: Log) -> Spec:
    """The spec with ``model.head.labels: from_data`` replaced by ``found`` sorted (read from ``where``); a
    list given in the spec is kept (labels outside it are refused when a split is encoded)."""
    head = spec.model.output_head
    if head.label_set() != "from_data":
        return spec
    labels = sorted(found)
    if len(labels) < 2:
        raise DataError(f"data.train: {where} has {len(labels)} distinct {what[:-1]}; a classification head needs "
                        "at least 2")
    log(f"model.head.labels: {len(labels)} {what} from {where}")
    model = spec.model.model_copy(update={"head": head.model_copy(update={"labels": labels})})
    return spec.model_copy(update={"model": model})


@register_task
class Tagging(Labels):
    """Words → their tags, one per word (part-of-speech tagging)."""

    name = "tagging"
    what = "a tagger"

    def fit_labels(self, spec: Spec, log: Log) -> Spec:
        """``model.head.labels: from_data``: the training split's tags, sorted."""
        if spec.model.output_head.label_set() != "from_data":
            return spec
        train = read_tagged(spec.data, "train", log)
        return fitted(spec, {t for tags in train.tags for t in tags}, train.tags_file, "tags", log)

    def encode(self, spec: Spec, split: str, tok: Tokenizer, log: Log, *, max_length: int | None = None
               ) -> BatchSource:
        return encode_tagged(spec, split, tok, log, max_length=max_length)

    def evaluate(self, runs: list[Run], call: EvalCall) -> Report:
        """The split's token accuracy beside the most-frequent-tag baseline of the training split; writes
        eval_SPLIT.json."""
        t = self.loaded(runs, call)
        run = runs[0]
        result, predicted = tag_split(run, t, call.split)
        table = scores_table(f"{run.spec.name} on {result.split} ({result.sentences} sentences, {result.tokens:,} "
                             f"words, {result.weights})")
        table.add("accuracy", f"{100 * result.accuracy:.2f}",
                  f"% of words tagged right (read at each word's {run.spec.model.head.piece} piece)")
        table.add("baseline", f"{100 * result.baseline_accuracy:.2f}", "% with each training word's most "
                  "frequent tag (unknown words: the most frequent tag)")
        for name, group, what in (("known", result.known, "seen in training"),
                                  ("unknown", result.unknown, "never seen")):
            if group and group["words"]:
                table.add(f"{name} words", f"{100 * group['accuracy']:.2f}", f"% of the {group['words']:,} words "
                          f"{what} (baseline {100 * group['baseline_accuracy']:.2f})")
        table.add("perplexity", f"{result.perplexity:.3f}", "per word, over the labels")
        kept = self.keep_outputs(run, result.split, [" ".join(tags) for tags in predicted])
        return [table, f"[dim]wrote {run.dir.write_eval(result)}, {kept.name}[/]"]

    def measures(self, run: Run, call: EvalCall) -> list[Measure]:
        """The accuracy over the split's words (right tags, words per sentence)."""
        from ..significance import accuracy_measure

        return [accuracy_measure(read_tagged(run.spec.data, call.split).tags)]

    def label_lines(self, t: NativeEngine, spec: Spec, lines: list[str]) -> list[str]:
        """Each line's tags, one per whitespace-separated word, space-separated (the format of PREFIX.tags)."""
        return [" ".join(tags) for tags in tag_lines(t, spec, lines, spec.decode.batch_tokens)]

    def study_record(self, run: Run, average: bool) -> EvalRecord:
        record, predicted = tag_split(run, load_native_engine(run, average=0 if average else None), "valid")
        self.keep_outputs(run, "valid", [" ".join(tags) for tags in predicted])
        return record

    def parity_rows(self, run: Run, t: NativeEngine) -> list[list[int]]:
        """The valid split's words' pieces, compared at every piece."""
        pieces = word_pieces(t.tokenizer, read_tagged(run.spec.data, "valid").words)
        return [word_row(p, word_piece(run.spec), t.tokenizer.special, word_bos(run.spec))[0] for p in pieces]

    def serve(self, run: Run, batch_tokens: int, loading: Loading, notify: Log) -> Endpoint:
        """``/classify``: each text's tags, on the native engine in float32."""
        from ..serving.api import ClassifyRequest
        from ..serving.endpoints import Labelling, native_only

        native_only(run.spec, ClassifyRequest, loading.engine, loading.compiled, loading.quantization, quantized=False)
        return Labelling(load_tagger(run, checkpoint=loading.checkpoint, average=loading.average,
                                     device=loading.device, notify=notify), run.spec, batch_tokens)
