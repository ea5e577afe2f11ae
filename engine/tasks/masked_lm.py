"""The masked LM (``model.kind: encoder_only`` with a masked_lm head; Devlin et al. 2019 §3.1): plain text
with some pieces hidden, each predicted at its position. It is pretrained to start a tagger or classifier
from (``train.init``): trained, evaluated by its perplexity and accuracy over the hidden pieces (masked as
in training, with the run's seed) and inspected; nothing else."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tbuild.builder.spec import Spec

from ..data.masked import encode_masked, line_rows
from ..decoding.masked_lm import MASKED_LM_COMMANDS, evaluate_masked_lm
from ..decoding.native import NativeEngine, load_native_engine
from ..errors import TbuildError
from .base import DecodeCall, EvalCall, Log, Report, scores_table
from .registry import register_task
from .tagging import Labels

if TYPE_CHECKING:
    from ..data.batches import BatchSource
    from ..data.tokenizer import Tokenizer
    from ..run.directory import Run


@register_task
class MaskedLM(Labels):
    """Hidden pieces of plain text predicted (BERT's pretraining)."""

    name = "masked_lm"
    what = "a masked LM"
    unit = "lines"
    commands = ("evaluate", "export")

    def refuse(self, command: str, spec: Spec) -> TbuildError:
        return TbuildError(f"tbuild {command} of a masked LM (model.head masked_lm) is not supported: "
                           f"{spec.name or 'this run'} is pretrained to start a tagger or classifier from "
                           f"(train.init); tbuild {', '.join(MASKED_LM_COMMANDS[:-1])} and {MASKED_LM_COMMANDS[-1]} "
                           "take it")

    def encode(self, spec: Spec, split: str, tok: Tokenizer, log: Log, *, max_length: int | None = None
               ) -> BatchSource:
        return encode_masked(spec, split, tok, log, max_length=max_length)

    def evaluate(self, runs: list[Run], call: EvalCall) -> Report:
        """The split's perplexity and accuracy over its hidden pieces, the split masked as in training with
        the run's seed (the same figures on every call); writes eval_SPLIT.json."""
        if len(runs) > 1:
            raise TbuildError("a masked LM is evaluated alone: give one run (ensembles combine taggers, classifiers "
                              "and translators)")
        t = self.loaded(runs, call)
        run = runs[0]
        result = evaluate_masked_lm(run, t, call.split)
        table = scores_table(f"{run.spec.name} on {result.split} ({result.sentences:,} lines, {result.weights})")
        table.add("masked perplexity", f"{result.perplexity:.2f}", f"per hidden piece ({result.tokens:,} pieces, "
                  "masked as in training, fixed seed)")
        table.add("masked accuracy", f"{100 * result.accuracy:.2f}", "% of hidden pieces scored best")
        table.add("NLL", f"{result.nll:.4f}", "nats per hidden piece")
        return [table, f"[dim]wrote {run.dir.write_eval(result)}[/]"]

    def decode(self, runs: list[Run], call: DecodeCall) -> list[str]:
        raise self.refuse("decode", runs[0].spec)

    def parity_rows(self, run: Run, t: NativeEngine) -> list[list[int]]:
        """The valid split's lines, unmasked, as the model reads them."""
        from ..data.datasets import read_split

        return line_rows(t.tokenizer, read_split(run.spec.data, "valid", lambda _: None)[1], t.max_output_len)

    def parity_loader(self) -> Callable[..., NativeEngine]:
        return load_native_engine  # no labels: the encoder and its head over the vocabulary
