"""Language modelling (``model.kind: decoder_only``): one side of text, trained on the prepared lines (each an
empty source and its text), evaluated by its perplexity, continued by ``tbuild generate``, served at
``/generate`` and exported as a causal LM. And the decoder-only translator (``model.prefix_lm``, Raffel et
al. 2020 §3.2.1): a translation task whose pairs are packed into one sequence, decoded, evaluated and
served as a translator, by the native engine alone."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tbuild.builder.spec import Spec
from tbuild.components.specs.graph import with_article

from ..decoding.lm import PREFIX_LM_COMMANDS, evaluate_perplexity, load_language_model
from ..errors import TbuildError
from .base import EvalCall, Loading, Log, Report, Task, scores_table
from .registry import register_task
from .translation import Translation, pairs_data, prepared_pairs

if TYPE_CHECKING:
    from ..data.batches import BatchSource
    from ..data.tokenizer import Tokenizer
    from ..run.directory import EvalRecord, Run, RunDir
    from ..serving.endpoints import Endpoint


@register_task
class LanguageModel(Task):
    """Text continued token by token (a decoder-only model over one side of text)."""

    name = "language_model"
    bos_first = True  # BOS, then the line's pieces
    what = "a language model"
    peft_type = "CAUSAL_LM"
    unit = "lines"
    commands = ("generate", "evaluate", "serve", "export")

    def refuse(self, command: str, spec: Spec) -> TbuildError:
        name = spec.name or "this run"
        return TbuildError(f"tbuild {command} needs a translator (model.kind encoder_decoder); {name}"
                           f" is {with_article(spec.model.kind)} language model, which has no {command} yet: tbuild "
                           "generate continues text, tbuild evaluate gives its perplexity")

    def training_data(self, spec: Spec, tokenizer: Tokenizer, run: RunDir, log: Log
                      ) -> tuple[BatchSource, BatchSource | None]:
        return pairs_data(spec, tokenizer, run, log)

    def prepare(self, spec: Spec, run: RunDir, log: Log, workers: int | None = None) -> Any:
        return prepared_pairs(spec, run, log, workers)

    def evaluate(self, runs: list[Run], call: EvalCall) -> Report:
        """The split's perplexity per token, nothing decoded; writes eval_SPLIT.json."""
        from ..device.process import configure_process

        if call.src is not None:
            raise TbuildError("--src/--ref score translations; a language model is scored on a split of its data "
                              "(--split test or valid)")
        if len(runs) > 1:
            raise TbuildError("a language model is evaluated alone: give one run (ensembles score translations)")
        if call.loading.engine != "native":
            raise TbuildError(f"--engine {call.loading.engine}: a language model is evaluated by the native engine "
                              "only")
        run, loading = runs[0], call.loading
        configure_process()
        lm = load_language_model(run, checkpoint=loading.checkpoint, average=loading.average, device=loading.device,
                                 quantization=loading.quantization or run.spec.decode.quantization, notify=call.notify)
        result = evaluate_perplexity(run, lm, call.split)
        table = scores_table(f"{run.spec.name} on {result.split} ({result.sentences} lines, {result.weights})")
        table.add("perplexity", f"{result.perplexity:.2f}", f"per subword token, EOS included ({result.tokens:,} "
                  "tokens, teacher-forced)")
        table.add("NLL", f"{result.nll:.4f}", "nats per token")
        table.add("seconds", f"{result.seconds:.1f}", result.precision)
        return [table, f"[dim]wrote {run.dir.write_eval(result)}[/]"]

    def study_record(self, run: Run, average: bool) -> EvalRecord:
        return evaluate_perplexity(run, load_language_model(run, average=0 if average else None), "valid")

    def serve(self, run: Run, batch_tokens: int, loading: Loading, notify: Log) -> Endpoint:
        """``/generate`` on the native engine, uncompiled."""
        from ..serving.api import GenerateRequest
        from ..serving.endpoints import Generation, native_only

        native_only(run.spec, GenerateRequest, loading.engine, loading.compiled)
        return Generation(load_language_model(run, checkpoint=loading.checkpoint, average=loading.average,
                                              device=loading.device, notify=notify,
                                              quantization=loading.quantization or run.spec.decode.quantization),
                          run.spec, batch_tokens)

    def export(self, run: Run) -> str:
        return "graph"

    def graph_parity(self, run: Run, to: str, out: Path, loading: Loading, notify: Log) -> Any:
        from ..export.graph_runs import lm_parity

        return lm_parity(run, to, out, checkpoint=loading.checkpoint, average=loading.average,
                         device=loading.device, notify=notify)


@register_task
class PrefixLM(Translation):
    """A decoder-only translator (``model.prefix_lm``): decoded, evaluated and served as a translator."""

    name = "prefix_lm"
    what = "a decoder-only translator"
    peft_type = "CAUSAL_LM"  # one decoder over the joined sequence
    commands = PREFIX_LM_COMMANDS

    def refuse(self, command: str, spec: Spec) -> TbuildError:
        return TbuildError(f"tbuild {command} of a decoder-only translator (model.prefix_lm) is not supported yet: "
                           f"tbuild {', '.join(PREFIX_LM_COMMANDS[:-1])} and {PREFIX_LM_COMMANDS[-1]} take it")

    def serve(self, run: Run, batch_tokens: int, loading: Loading, notify: Log) -> Any:
        """``/translate`` on the native engine, uncompiled: CTranslate2 has no export of it, and its decoder
        step recompiles past torch.compile's limit (docs/benchmarks.md)."""
        what = "a decoder-only translator (model.prefix_lm)"
        if loading.engine != "native":
            raise TbuildError(f"--engine {loading.engine}: {what} is served by the native engine (it has no "
                              f"{loading.engine} export)")
        if loading.compiled:
            raise TbuildError(f"--compile: {what} is served uncompiled (its decoder step recompiles past "
                              "torch.compile's limit)")
        return super().serve(run, batch_tokens, loading, notify)

    def export(self, run: Run) -> str:
        return "graph"  # which refuses it, saying why (``export/graph_targets.py``)
