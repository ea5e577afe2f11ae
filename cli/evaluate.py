"""`tbuild evaluate`: decode a split and score it with sacreBLEU (BLEU, chrF) and perplexity."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import typer
from rich.table import Table

from .common import console, guarded, notify
from .options import NO_REPEAT_NGRAM, SET_OPTION, Ensembling, Loading, Search, decode_runs, grouped, load_decoder

TARGETS = typer.Argument(..., help="A spec, run directory or checkpoint; several: an ensemble of them (the "
                         "perplexity is the first one's).")


@guarded
@grouped
def evaluate(
    targets: list[Path] = TARGETS,
    split: str = typer.Option("test", "--split", help="test or valid (files from the spec's data section)."),
    src: Path | None = typer.Option(None, "--src", help="Score this source file instead of a split (with --ref)."),
    ref: Path | None = typer.Option(None, "--ref", help="References for --src."),
    lowercase: bool = typer.Option(False, "--lowercase", help="Headline BLEU lowercased (as many papers report)."),
    search: Search = Search(),
    show: int = typer.Option(3, "--show", help="Print this many example translations."),
    no_repeat_ngram: int | None = NO_REPEAT_NGRAM,
    ensembling: Ensembling = Ensembling(),
    loading: Loading = Loading(),
    params: Path | None = typer.Option(None, "--params", "-p", help="Parsing runs: an EVALB parameter file, as "
                                      "tbuild evalb's (default: COLLINS.prm's rules, built in)."),
    diagnose: bool = typer.Option(False, "--diagnose", help="Parsing runs: also F1 by sentence length beside "
                                  "the right-branching floor, teacher-forced accuracy by token kind and span "
                                  "errors (eval_SPLIT.diagnosis.json)."),
    set_: list[str] = SET_OPTION,
) -> None:
    """Decode and score: sacreBLEU BLEU with its signature, chrF, perplexity of the references; for a
    parsing run (data set treebank), EVALB's bracketing F1 instead (§6.3)."""
    from tbuild.engine.data.classified import classifier
    from tbuild.engine.data.masked import masked_lm
    from tbuild.engine.data.tagged import labelled
    from tbuild.engine.decoding.evaluation import evaluate as run_evaluation
    from tbuild.engine.decoding.lm import is_language_model
    from tbuild.engine.decoding.request import DecodeRequest
    from tbuild.engine.decoding.translator import load_translator
    from tbuild.engine.errors import TbuildError
    from tbuild.engine.parsing.evaluation import is_parsing
    from tbuild.engine.process import configure_process

    if split not in ("test", "valid"):
        raise TbuildError(f"--split must be test or valid, not {split!r}")
    if (src is None) != (ref is None):
        raise TbuildError("--src and --ref go together")
    runs = decode_runs(targets, set_, ensembling.profile, beam=search.beam, alpha=search.alpha,
                       no_repeat_ngram=no_repeat_ngram)
    run = runs[0]
    if masked_lm(run.spec):
        _masked_lm(runs, split, src, loading)
        return
    if is_language_model(run.spec) or labelled(run.spec):
        alone = _language_model if is_language_model(run.spec) else _classifier if classifier(run.spec) else _tagger
        alone(runs, split, src, loading)
        return
    process = configure_process()
    # decoding: a second engine when it differs from the float32 native model (loaded first: a missing
    # runtime stops before anything else); perplexity: that native model
    quantization = loading.quantization or run.spec.decode.quantization
    same = loading.engine == "native" and quantization == "float32" and len(runs) == 1
    decoder = None if same else load_decoder(runs, loading, ensembling, notify)
    translator = load_translator(run, checkpoint=loading.checkpoint, average=loading.average, device=loading.device,
                                 notify=notify, compiled=loading.compile_)
    if is_parsing(run.spec):
        _parsing(run, translator, decoder, split=split, src=src, ref=ref, params=params, show=show,
                 after_batch=process.after_batch, diagnose=diagnose)
        return
    result, sources, references, hyps = run_evaluation(run, translator, engine=decoder, split=split, src=src,
                                                       ref=ref, after_batch=process.after_batch,
                                                       request=DecodeRequest.of(run.spec.decode))
    for s, r, h in list(zip(sources, references, hyps, strict=True))[:show]:
        console.print(f"[dim]src[/] {s}\n[dim]ref[/] {r}\n[bold]hyp[/] {h}\n", highlight=False)
    _report(run, result, lowercase)


def _scores_table(title: str) -> Table:
    """An empty metric / score / note table, the one every kind's evaluation prints."""
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    table.add_column("score", justify="right")
    table.add_column("note")
    return table


def _report(run, result, lowercase: bool) -> None:  # noqa: ANN001
    """The scores' table and signatures; writes eval_SPLIT.json."""

    table = _scores_table(f"{run.spec.name} on {result.split} ({result.sentences} sentences, {result.weights}, "
                          f"{result.engine} engine)")
    rows = [("BLEU", result.bleu, "sacreBLEU, cased"), ("BLEU (lowercased)", result.bleu_lowercase, "sacreBLEU, -lc")]
    for name, score, note in (reversed(rows) if lowercase else rows):
        table.add_row(name, f"{score:.2f}", note)
    table.add_row("chrF", f"{result.chrf:.2f}", "sacreBLEU chrF2")
    table.add_row("perplexity", f"{result.perplexity:.2f}", "per target subword, teacher-forced on the references"
                  + ("" if result.engine == "native" else " (native model)"))
    table.add_row("sentences/s", f"{result.sentences_per_second:.1f}",
                  f"beam {result.beam}, α {result.alpha}, {result.precision}, {result.decode_seconds:.1f} s")
    console.print(table)
    for name, sig in (("BLEU", result.bleu_signature), ("BLEU lowercased", result.bleu_lowercase_signature),
                      ("chrF", result.chrf_signature)):
        console.print(f"[dim]{name} signature: {sig}[/]", highlight=False, soft_wrap=True)
    out = run.dir.write_eval(result)
    console.print(f"[dim]wrote {out}[/]")


def _language_model(runs: list, split: str, src: Path | None, loading: Loading) -> None:
    """A language model (model.kind decoder_only): the split's perplexity per token, nothing decoded;
    writes eval_SPLIT.json."""
    from tbuild.engine.decoding.lm import evaluate_perplexity, load_language_model
    from tbuild.engine.errors import TbuildError
    from tbuild.engine.process import configure_process

    if src is not None:
        raise TbuildError("--src/--ref score translations; a language model is scored on a split of its data "
                          "(--split test or valid)")
    if len(runs) > 1:
        raise TbuildError("a language model is evaluated alone: give one run (ensembles score translations)")
    if loading.engine != "native":
        raise TbuildError(f"--engine {loading.engine}: a language model is evaluated by the native engine only")
    run = runs[0]
    configure_process()
    lm = load_language_model(run, checkpoint=loading.checkpoint, average=loading.average, device=loading.device,
                             quantization=loading.quantization or run.spec.decode.quantization, notify=notify)
    result = evaluate_perplexity(run, lm, split)
    table = _scores_table(f"{run.spec.name} on {result.split} ({result.sentences} lines, {result.weights})")
    table.add_row("perplexity", f"{result.perplexity:.2f}", f"per subword token, EOS included ({result.tokens:,} "
                  "tokens, teacher-forced)")
    table.add_row("NLL", f"{result.nll:.4f}", "nats per token")
    table.add_row("seconds", f"{result.seconds:.1f}", result.precision)
    console.print(table)
    console.print(f"[dim]wrote {run.dir.write_eval(result)}[/]")


def _tagger(runs: list, split: str, src: Path | None, loading: Loading) -> None:
    """A tagger (model.kind encoder_only): the split's token accuracy beside the most-frequent-tag
    baseline of the training split; writes eval_SPLIT.json."""
    from tbuild.engine.decoding.tagger import evaluate_tagger

    run, t = _labeller(runs, src, loading, "a tagger")
    result = evaluate_tagger(run, t, split)
    table = _scores_table(f"{run.spec.name} on {result.split} ({result.sentences} sentences, {result.tokens:,} "
                          f"words, {result.weights})")
    table.add_row("accuracy", f"{100 * result.accuracy:.2f}",
                  f"% of words tagged right (read at each word's {run.spec.model.head.piece} piece)")
    table.add_row("baseline", f"{100 * result.baseline_accuracy:.2f}", "% with each training word's most "
                  "frequent tag (unknown words: the most frequent tag)")
    for name, group, what in (("known", result.known, "seen in training"), ("unknown", result.unknown, "never seen")):
        if group and group["words"]:
            table.add_row(f"{name} words", f"{100 * group['accuracy']:.2f}", f"% of the {group['words']:,} words "
                          f"{what} (baseline {100 * group['baseline_accuracy']:.2f})")
    table.add_row("perplexity", f"{result.perplexity:.3f}", "per word, over the labels")
    console.print(table)
    console.print(f"[dim]wrote {run.dir.write_eval(result)}[/]")


def _masked_lm(runs: list, split: str, src: Path | None, loading: Loading) -> None:
    """A masked LM (model.head masked_lm): the split's perplexity and accuracy over its hidden pieces, the
    split masked as in training with the run's seed (the same figures on every call); writes eval_SPLIT.json."""
    from tbuild.engine.decoding.masked_lm import evaluate_masked_lm, load_masked_lm

    run, t = _labeller(runs, src, loading, "a masked LM", load=load_masked_lm)
    result = evaluate_masked_lm(run, t, split)
    table = _scores_table(f"{run.spec.name} on {result.split} ({result.sentences:,} lines, {result.weights})")
    table.add_row("masked perplexity", f"{result.perplexity:.2f}", f"per hidden piece ({result.tokens:,} pieces, "
                  "masked as in training, fixed seed)")
    table.add_row("masked accuracy", f"{100 * result.accuracy:.2f}", "% of hidden pieces scored best")
    table.add_row("NLL", f"{result.nll:.4f}", "nats per hidden piece")
    console.print(table)
    console.print(f"[dim]wrote {run.dir.write_eval(result)}[/]")


def _labeller(runs: list, src: Path | None, loading: Loading, what: str, load: Callable | None = None) -> tuple:
    """A tagger's, classifier's or masked LM's run and its loaded model (``load``: load_tagger unless given;
    ``what`` names it in the one-line refusal of --src, several runs or another engine)."""
    from tbuild.engine.decoding.tagger import load_tagger
    from tbuild.engine.errors import TbuildError
    from tbuild.engine.process import configure_process

    if src is not None or len(runs) > 1 or loading.engine != "native":
        raise TbuildError(f"{what} is evaluated alone, on a split of its data, by the native engine "
                          "(no --src/--ref, one run, no --engine)")
    configure_process()
    return runs[0], (load or load_tagger)(runs[0], checkpoint=loading.checkpoint, average=loading.average,
                                          device=loading.device, notify=notify)


def _classifier(runs: list, split: str, src: Path | None, loading: Loading) -> None:
    """A sequence classifier (model.kind encoder_only, data.dataset classification): the split's accuracy
    beside the majority-class baseline of the training split, and the confusion table (gold rows,
    predicted columns); writes eval_SPLIT.json."""
    from tbuild.engine.decoding.classifier import evaluate_classifier

    run, t = _labeller(runs, src, loading, "a classifier")
    result = evaluate_classifier(run, t, split)
    table = _scores_table(f"{run.spec.name} on {result.split} ({result.sentences:,} lines, {result.weights})")
    table.add_row("accuracy", f"{100 * result.accuracy:.2f}", "% of lines classified right")
    table.add_row("baseline", f"{100 * result.baseline_accuracy:.2f}", "% with the most frequent training label "
                  "(majority class)")
    table.add_row("perplexity", f"{result.perplexity:.3f}", "per line, over the labels")
    console.print(table)
    confusion = Table(title="Confusion (rows: gold label, columns: predicted)", title_justify="left")
    labels = list(result.confusion)
    for column in ("gold", *labels, "lines", "right %"):
        confusion.add_column(column, justify="left" if column == "gold" else "right")
    for gold, row in result.confusion.items():
        n = sum(row.values())
        confusion.add_row(gold, *(f"{row[p]:,}" for p in labels), f"{n:,}",
                          f"{100 * row[gold] / n:.2f}" if n else "-")
    console.print(confusion)
    console.print(f"[dim]wrote {run.dir.write_eval(result)}[/]")


def _parsing(run, translator, decoder, *, split: str, src: Path | None, ref: Path | None,  # noqa: ANN001
             params: Path | None, show: int, after_batch, diagnose: bool = False) -> None:  # noqa: ANN001
    """A parsing run: EVALB's figures (COLLINS.prm) and the repairs; writes eval_SPLIT.json, the
    repaired trees (eval_SPLIT.trees) and EVALB's full report (eval_SPLIT.evalb)."""
    from tbuild.engine.files import atomic_write
    from tbuild.engine.parsing.evalb import read_params
    from tbuild.engine.parsing.evaluation import describe_repairs, evaluate_parsing

    rules = read_params(params) if params is not None else None
    result, sources, gold, tests, scored = evaluate_parsing(
        run, translator, engine=decoder, split=split, src=src, ref=ref, params=rules,
        params_name=str(params) if params else "COLLINS.prm", after_batch=after_batch)
    for s, g, t in list(zip(sources, gold, tests, strict=True))[:show]:
        console.print(f"[dim]src[/]  {s}\n[dim]gold[/] {g}\n[bold]test[/] {t}\n", highlight=False)
    table = Table(title=f"{run.spec.name} on {result.split} ({result.sentences} sentences, {result.weights}, "
                        f"EVALB {result.params})", title_justify="left")
    table.add_column("metric")
    table.add_column("all", justify="right")
    table.add_column(f"len<={result.cutoff}", justify="right")
    rows = [("Bracketing F1", "f1"), ("Bracketing recall", "recall"), ("Bracketing precision", "precision"),
            ("Complete match", "complete_match"), ("Average crossing", "average_crossing")]
    for name, key in rows:
        table.add_row(name, f"{result.all[key]:.2f}", f"{result.short[key]:.2f}")
    for name, key in (("Sentences", "sentences"), ("Error sentences", "error_sentences"),
                      ("Skipped sentences", "skipped_sentences")):
        table.add_row(name, str(result.all[key]), str(result.short[key]))
    console.print(table)
    console.print(f"repairs: {describe_repairs(result.repairs)}", highlight=False)
    console.print(f"perplexity {result.perplexity:.2f} (teacher-forced on the linearized gold trees); "
                  f"{result.sentences_per_second:.1f} sentences/s (beam {result.beam}, α {result.alpha}, "
                  f"{result.precision}, {result.decode_seconds:.1f} s)", highlight=False)
    base = run.dir.eval_file(result.split).with_suffix("")
    atomic_write(base.with_suffix(".trees"), "".join(t + "\n" for t in tests).encode())
    atomic_write(base.with_suffix(".evalb"), scored.report().encode())
    run.dir.write_eval(result)
    console.print(f"[dim]wrote {base}.json, {base.name}.trees, {base.name}.evalb[/]")
    if diagnose:
        _diagnosis(run, translator, gold, tests, scored, base)


def _diagnosis(run, translator, gold: list[str], tests: list[str], scored, base: Path) -> None:  # noqa: ANN001
    """``--diagnose``: where the points go (engine/parsing/diagnosis.py); writes eval_SPLIT.diagnosis.json."""
    import json

    from tbuild.engine.files import atomic_write
    from tbuild.engine.parsing.diagnosis import diagnose

    found = diagnose(run, translator, gold, tests, scored)
    table = Table(title="F1 by sentence length (words)", title_justify="left")
    for column in ("length", "sentences", "F1", "right-branching F1", "complete match"):
        table.add_column(column, justify="right")
    for b in found["by_length"]:
        table.add_row(b["bin"], str(b["sentences"]), *("–" if b[k] is None else f"{b[k]:.2f}"
                                                        for k in ("f1", "floor_f1", "complete_match")))
    console.print(table)
    table = Table(title="Teacher-forced accuracy by gold token kind", title_justify="left")
    for column in ("kind", "tokens", "exact %", "same kind %"):
        table.add_column(column, justify="right")
    for kind, a in found["token_accuracy"].items():
        table.add_row(kind, str(a["tokens"]), f"{a['exact']:.2f}", f"{a['move']:.2f}")
    console.print(table)
    s = found["spans"]
    console.print(f"output constituents: {s['right']} right, {s['wrong_label']} wrong label, {s['wrong_length']} "
                  f"right start and label but wrong number of words, {s['other']} other; right-branching floor "
                  f"F1 {found['floor']['all']:.2f} (all), {found['floor']['short']:.2f} (short)", highlight=False)
    atomic_write(base.with_suffix(".diagnosis.json"), json.dumps(found, indent=1).encode())
    console.print(f"[dim]wrote {base.name}.diagnosis.json[/]")
