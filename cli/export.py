"""`tbuild export`: write a trained run for an inference runtime, then check parity with tbuild."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from .common import console, guarded, notify
from .options import AVERAGE, CHECKPOINT, DEVICE, EXPORT_QUANTIZATION, OUTPUT, SET_OPTION, TARGET

if TYPE_CHECKING:
    from tbuild.engine.run.directory import Run


@guarded
def export(
    target: Path = TARGET,
    to: str = typer.Option("ctranslate2", "--to", help="Runtime to export to: ctranslate2, or hf (a Hugging Face "
                           "folder: MarianMTModel for a post-norm translator, PegasusForConditionalGeneration for a "
                           "pre-norm one, with MarianTokenizer files; GPT2LMHeadModel or LlamaForCausalLM for "
                           "decoder_only; XLMRobertaXLForTokenClassification for a tagger)."),
    output: Path | None = OUTPUT("the folder RUN/export/TO-QUANTIZATION"),
    quantization: str | None = EXPORT_QUANTIZATION,
    check: str = typer.Option("valid", "--check", help="Parity check on the valid split, or none."),
    check_src: Path | None = typer.Option(None, "--check-src", help="Check parity on this source file."),
    check_ref: Path | None = typer.Option(None, "--check-ref", help="References for --check-src."),
    profile: str | None = typer.Option(None, "--profile", help="Refuse to export unless the target's runtime "
                                       "honours this decode profile (decode: the decode section itself)."),
    checkpoint: Path | None = CHECKPOINT,
    average: int | None = AVERAGE,
    device: str = DEVICE,
    set_: list[str] = SET_OPTION,
) -> None:
    """Export a run's model; then decode a split with tbuild and the export and compare them."""
    from tbuild.engine.errors import TbuildError
    from tbuild.engine.export import ctranslate2
    from tbuild.engine.export.graph_runs import export_translator
    from tbuild.engine.export.provenance import write_provenance
    from tbuild.engine.export.targets import TARGETS, check_profile, profile_verdicts
    from tbuild.engine.run.directory import resolve_run
    from tbuild.engine.tasks.registry import task_of

    if to not in TARGETS:
        raise TbuildError(f"--to {to!r}: targets are {', '.join(TARGETS)}")
    if check not in ("valid", "none"):
        raise TbuildError(f"--check must be valid or none, not {check!r}")
    if (check_src is None) != (check_ref is None):
        raise TbuildError("--check-src and --check-ref go together")
    if to == "hf" and quantization not in (None, "float32"):
        raise TbuildError(f"--quantization {quantization!r} applies to --to ctranslate2; hf is written in float32")
    run = resolve_run(target, set_)
    if task_of(run.spec).export(run) == "graph":  # a language model's or an encoder's own classes
        if check_src is not None:
            raise TbuildError(f"--check-src: {run.spec.model.called}'s export is checked on the valid split")
        return _export_graph(run, to, output, quantization, checkpoint, average, device, check)
    if profile is not None:
        check_profile(run.spec, to, profile)
    out = output or run.dir.path / "export" / f"{to}-{quantization or 'float32'}"
    if to == "hf":
        weights = export_translator(run, out, checkpoint=checkpoint, average=average)
    else:
        weights = ctranslate2.export_run(run, out, quantization=quantization, checkpoint=checkpoint, average=average)
    write_provenance(run, out, to, weights)
    console.print(f"wrote {out} ({to}, {quantization or 'float32'}, weights {weights})", highlight=False)
    verdicts = profile_verdicts(run.spec)[to]
    honoured = ", ".join(n for n, why in verdicts.items() if why is None) or "none"
    refused = "".join(f"\n  {why}" for why in verdicts.values() if why is not None)
    console.print(f"decode profiles {to} honours: {honoured}{refused}", highlight=False)
    if check != "none" or check_src is not None:
        _parity(run, to, out, check_src, check_ref, quantization, checkpoint, average, device)
    if to == "hf":  # the hub shows the folder's README.md as the model card
        from tbuild.engine.run.card import CARD, write_card

        write_card(run, out / CARD, exports=(out,), task=task_of(run.spec).card(run))
        console.print(f"wrote {out / CARD} (model card)", highlight=False)


def _parity(run: Run, to: str, out: Path, src: Path | None, ref: Path | None, quantization: str | None,
            checkpoint: Path | None, average: int | None, device: str) -> None:
    from tbuild.engine.data.corpus import read_parallel
    from tbuild.engine.data.datasets import read_split
    from tbuild.engine.decoding.native import load_native_engine
    from tbuild.engine.device.process import configure_process
    from tbuild.engine.export.parity import (
        SEARCH_DIFFERENCES,
        TEACHER_FORCED_LINES,
        check_parity,
        encoding_failure,
        parity_failure,
        save_parity,
    )

    if src is not None and ref is not None:
        sources, references = read_parallel(src, ref, "--check-src/--check-ref")
    else:
        sources, references = read_split(run.spec.data, "valid", lambda _: None)
    process = configure_process()
    translator = load_native_engine(run, checkpoint=checkpoint, average=average, device=device, notify=notify)
    r = check_parity(run, translator, out, sources, references, target=to, after_batch=process.after_batch)
    save_parity(r, out)
    console.print(f"parity on {r.sentences} sentences (beam {r.beam}, α {r.alpha}):", highlight=False)
    console.print(f"  BLEU tbuild {r.bleu_tbuild:.2f}, export {r.bleu_export:.2f}, delta {r.delta:+.2f}",
                  highlight=False)
    console.print(f"  identical lines {100 * r.identical:.1f}% (greedy, both sides: {100 * r.identical_greedy:.1f}%)",
                  highlight=False)
    if r.first_difference is not None:
        n, ours, theirs = r.first_difference
        console.print(f"  first difference, line {n}:\n    tbuild: {ours}\n    export: {theirs}", highlight=False)
    console.print(f"  max |Δ log-prob| teacher-forced (up to {TEACHER_FORCED_LINES} lines): {r.max_logprob_diff:.2e}",
                  highlight=False)
    console.print(f"  source lines the export's own tokenizer encodes otherwise: {r.encoded_differently}",
                  highlight=False)
    if r.beam > 1:
        console.print(f"  (beam outputs may differ where the searches do: {SEARCH_DIFFERENCES[to]})", highlight=False)
    _fail_on(parity_failure(r.max_logprob_diff, quantization, "log-prob")
             or encoding_failure(r.encoded_differently, r.sentences, "source lines"), out)


def _fail_on(failure: str | None, out: Path) -> None:
    """Exit with the parity check's failure, if any, in one line; the folder and its report stay to inspect."""
    from tbuild.engine.errors import TbuildError

    if failure is not None:
        raise TbuildError(f"{failure}; {out} and its parity report are kept to inspect (--check none skips the "
                          "check)")


def _export_graph(run: Run, to: str, output: Path | None, quantization: str | None,
                  checkpoint: Path | None, average: int | None, device: str, check: str) -> None:
    """A decoder-only or encoder-only run: write it (docs/export.md), then the parity on the valid split."""
    from tbuild.engine.export.graph_runs import export_graph
    from tbuild.engine.export.parity import encoding_failure, parity_failure
    from tbuild.engine.export.provenance import write_provenance
    from tbuild.engine.tasks.base import Loading
    from tbuild.engine.tasks.registry import task_of

    out = output or run.dir.path / "export" / f"{to}-{quantization or 'float32'}"
    task = task_of(run.spec)
    weights = export_graph(run, to, out, bos_first=task.starts_with_bos(run.spec), quantization=quantization,
                           checkpoint=checkpoint, average=average)
    write_provenance(run, out, to, weights)
    console.print(f"wrote {out} ({to}, {quantization or 'float32'}, weights {weights})", highlight=False)
    if check == "none":
        return
    r = task.graph_parity(run, to, out, Loading(checkpoint, average, device), notify)
    console.print(f"parity with tbuild ({to}, valid split):", highlight=False)
    for line in r.lines_out():
        console.print(f"  {line}", highlight=False)
    _fail_on(parity_failure(r.max_logit_diff, quantization, "logit")
             or encoding_failure(r.encoded_differently, r.outputs, "prompts"), out)
