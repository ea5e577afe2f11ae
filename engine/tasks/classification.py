"""Sequence classification (``model.kind: encoder_only`` with a sequence_classification head, the
classification data set): LABEL<TAB>TEXT lines, one label per line, read from the pooled final states. Its
labels are fitted from the training split; it is evaluated by its accuracy beside the majority class with
the confusion table, decoded into a label per line and served at ``/classify``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tbuild.builder.spec import Spec

from ..data.line_labels import encode_classified, read_classified, text_rows
from ..data.word_labels import labels_of
from ..decoding.classifier import classify_lines, classify_split
from ..decoding.native import NativeEngine, load_native_engine
from ..decoding.tagger import load_tagger
from .base import EvalCall, Loading, Log, Report, Table, scores_table
from .registry import register_task
from .tagging import Labels, fitted

if TYPE_CHECKING:
    from ..data.batches import BatchSource
    from ..data.tokenizer import Tokenizer
    from ..run.directory import EvalRecord, Run
    from ..serving.endpoints import Endpoint
    from ..significance import Measure


@register_task
class Classification(Labels):
    """A line → its label (language identification, sentiment, ...)."""

    name = "classification"
    bos_first = True  # BOS (what pooling: first reads), the line's pieces, EOS
    what = "a classifier"

    def fit_labels(self, spec: Spec, log: Log) -> Spec:
        """``model.head.labels: from_data``: the training split's labels, sorted."""
        if spec.model.output_head.label_set() != "from_data":
            return spec
        examples = read_classified(spec.data, "train", log)
        return fitted(spec, set(examples.labels), examples.file, "labels", log)

    def encode(self, spec: Spec, split: str, tok: Tokenizer, log: Log, *, max_length: int | None = None
               ) -> BatchSource:
        return encode_classified(spec, split, tok, log, max_length=max_length)

    def evaluate(self, runs: list[Run], call: EvalCall) -> Report:
        """The split's accuracy beside the majority-class baseline of the training split, and the confusion
        table (gold rows, predicted columns); writes eval_SPLIT.json."""
        t = self.loaded(runs, call)
        run = runs[0]
        result, predicted = classify_split(run, t, call.split)
        table = scores_table(f"{run.spec.name} on {result.split} ({result.sentences:,} lines, {result.weights})")
        table.add("accuracy", f"{100 * result.accuracy:.2f}", "% of lines classified right")
        table.add("baseline", f"{100 * result.baseline_accuracy:.2f}", "% with the most frequent training label "
                  "(majority class)")
        table.add("perplexity", f"{result.perplexity:.3f}", "per line, over the labels")
        labels = list(result.confusion)
        columns = ("gold", *labels, "lines", "right %")
        confusion = Table("Confusion (rows: gold label, columns: predicted)", columns,
                          right=tuple(range(1, len(columns))))
        for gold, row in result.confusion.items():
            n = sum(row.values())
            confusion.add(gold, *(f"{row[p]:,}" for p in labels), f"{n:,}", f"{100 * row[gold] / n:.2f}" if n else "-")
        kept = self.keep_outputs(run, result.split, predicted)
        return [table, confusion, f"[dim]wrote {run.dir.write_eval(result)}, {kept.name}[/]"]

    def measures(self, run: Run, call: EvalCall) -> list[Measure]:
        """The accuracy over the split's lines (right or not, one label each)."""
        from ..significance import accuracy_measure

        return [accuracy_measure([[label] for label in read_classified(run.spec.data, call.split).labels],
                                 lambda line: [line])]

    def label_lines(self, t: NativeEngine, spec: Spec, lines: list[str]) -> list[str]:
        """Each line's label (its text alone, no label column)."""
        return classify_lines(t, labels_of(spec), lines, spec.decode.batch_tokens)

    def study_record(self, run: Run, average: bool) -> EvalRecord:
        record, predicted = classify_split(run, load_native_engine(run, average=0 if average else None), "valid")
        self.keep_outputs(run, "valid", predicted)
        return record

    def serve(self, run: Run, batch_tokens: int, loading: Loading, notify: Log) -> Endpoint:
        """``/classify``: each text's label, on the native engine in float32."""
        from ..serving.api import ClassifyRequest
        from ..serving.endpoints import Classifying, native_only

        native_only(run.spec, ClassifyRequest, loading.engine, loading.compiled, loading.quantization, quantized=False)
        return Classifying(load_tagger(run, checkpoint=loading.checkpoint, average=loading.average,
                                       device=loading.device, notify=notify), run.spec, batch_tokens)

    def parity_rows(self, run: Run, t: NativeEngine) -> list[list[int]]:
        """The valid split's lines as the classifier reads them (BOS, pieces, EOS)."""
        return text_rows(t.tokenizer, read_classified(run.spec.data, "valid").texts, t.max_output_len)
