"""`tbuild decode`: translate lines from stdin or a file with beam search (§6.1) or sampling, one run
or an ensemble of runs."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from .common import err_console, guarded, notify
from .options import (
    NBEST,
    NO_REPEAT_NGRAM,
    SAMPLING,
    SEED,
    SET_OPTION,
    TEMPERATURE,
    TOPK,
    TOPP,
    Ensembling,
    Loading,
    Search,
    decode_runs,
    grouped,
    load_decoder,
)

TARGETS = typer.Argument(..., help="A spec, run directory or checkpoint; several: an ensemble of them.")


@guarded
@grouped
def decode(
    targets: list[Path] = TARGETS,
    input_: Path | None = typer.Option(None, "--input", "-i", help="Read this file instead of stdin (a line: "
                                       "source [TAB target prefix [TAB phrases to include [TAB phrases to "
                                       "exclude]]], phrases separated by |||)."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write here instead of stdout."),
    search: Search = Search(),
    nbest: int | None = NBEST,
    sampling: str | None = SAMPLING,
    topk: int | None = TOPK,
    topp: float | None = TOPP,
    temperature: float | None = TEMPERATURE,
    seed: int | None = SEED,
    no_repeat_ngram: int | None = NO_REPEAT_NGRAM,
    prefix_file: Path | None = typer.Option(None, "--prefix-file", help="One target prefix per input line, "
                                            "forced at the start of its output."),
    constraints_file: Path | None = typer.Option(None, "--constraints-file", help="Lexical constraints, one "
                                                 'JSON object per input line: {"include": [phrases the output '
                                                 'must contain], "exclude": [phrases it must not contain]}.'),
    format_: str = typer.Option("text", "--format", help="text (translations) or jsonl (one object per line: "
                                "source, output, scores, token log-probabilities, n-best list)."),
    align: bool = typer.Option(False, "--align", help="jsonl: a source position per output token "
                               "(cross-attention of the last decoder layer)."),
    ensembling: Ensembling = Ensembling(),
    loading: Loading = Loading(),
    set_: list[str] = SET_OPTION,
) -> None:
    """Translate one sentence per line; an empty line gives an empty line. A tagger's run (model.kind
    encoder_only): each line's tags instead, one per word, space-separated; a classifier's: its label."""
    from tbuild.engine.data.tagged import labelled
    from tbuild.engine.decoding.lm import require_kind
    from tbuild.engine.decoding.masked_lm import refuse_masked_lm
    from tbuild.engine.decoding.request import DecodeRequest, Hooks
    from tbuild.engine.files import atomic_write
    from tbuild.engine.parsing.evaluation import tree_rule_for
    from tbuild.engine.process import configure_process

    DecodeRequest(format=format_, align=align)  # a bad --format or --align is refused before any run is read
    runs = decode_runs(targets, set_, ensembling.profile, beam=search.beam, alpha=search.alpha, nbest=nbest,
                       sampling=sampling, topk=topk, topp=topp, temperature=temperature, seed=seed,
                       no_repeat_ngram=no_repeat_ngram)
    refuse_masked_lm(runs[0].spec, "decode")
    if labelled(runs[0].spec):
        _labels(runs, input_, output, loading)
        return
    for run in runs:
        require_kind(run.spec, "decode", language_model=False)
    name = str(input_) if input_ else "stdin"
    lines, prefixes, constraints = _read_input(input_, name, prefix_file, constraints_file)
    request = DecodeRequest.of(runs[0].spec.decode, prefixes=prefixes, constraints=constraints, format=format_,
                               align=align)
    process = configure_process()

    def warn(message: str) -> None:
        err_console.print(f"[yellow]warning:[/] {name}: {message}", highlight=False, soft_wrap=True)

    translator = load_decoder(runs, loading, ensembling, notify)
    request = request.but(step_rule=tree_rule_for(runs[0].spec, translator, lines))
    show = input_ is not None and err_console.is_terminal
    with Progress(TextColumn("decoding"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=err_console, disable=not show, transient=True) as bar:
        task = bar.add_task("decode", total=len(lines))
        results = translator.translate(lines, request, Hooks(warn, lambda n: bar.advance(task, n),
                                                             process.after_batch))
    text = "".join(line + "\n" for line in _out_lines(runs[0], translator, request, lines, results))
    if output is not None:
        atomic_write(output, text.encode())
    else:
        sys.stdout.write(text)


def _labels(runs: list, input_: Path | None, output: Path | None, loading: Loading) -> None:
    """A tagger: each input line's tags, one per whitespace-separated word, space-separated (the format of
    PREFIX.tags); a classifier: each input line's label (its text alone, no label column). An empty line
    gives an empty line."""
    from tbuild.engine.data.classified import classifier
    from tbuild.engine.data.tagged import labels_of
    from tbuild.engine.decoding.classifier import classify_lines
    from tbuild.engine.decoding.tagger import load_tagger, tag_lines
    from tbuild.engine.decoding.translator import decode_lines
    from tbuild.engine.errors import TbuildError
    from tbuild.engine.files import atomic_write

    what = "a classifier" if classifier(runs[0].spec) else "a tagger"
    if len(runs) > 1:
        raise TbuildError(f"{what} decodes alone: give one run (ensembles decode translations)")
    if input_ is not None and not input_.is_file():
        raise TbuildError(f"{input_}: input file not found")
    lines = decode_lines(input_.read_bytes() if input_ else sys.stdin.buffer.read(), str(input_ or "stdin"))
    run = runs[0]
    t = load_tagger(run, checkpoint=loading.checkpoint, average=loading.average, device=loading.device,
                    notify=notify)
    labels, batch = labels_of(run.spec), run.spec.decode.batch_tokens
    if classifier(run.spec):
        out = classify_lines(t, labels, lines, batch)
    else:
        out = [" ".join(tags) for tags in tag_lines(t, run.spec, lines, batch)]
    text = "".join(line + "\n" for line in out)
    if output is not None:
        atomic_write(output, text.encode())
    else:
        sys.stdout.write(text)


def _read_input(input_: Path | None, name: str, prefix_file: Path | None, constraints_file: Path | None
                ) -> tuple[list[str], list[str] | None, list | None]:
    """The input's lines (stdin without ``input_``), with their target prefixes and lexical constraints
    from its columns or from the side files."""
    from tbuild.engine.decoding.records import read_constraints, read_prefixes, split_columns
    from tbuild.engine.decoding.translator import decode_lines
    from tbuild.engine.errors import TbuildError

    if input_ is not None and not input_.is_file():
        raise TbuildError(f"{input_}: input file not found")
    data = input_.read_bytes() if input_ else sys.stdin.buffer.read()
    lines, prefixes, constraints = split_columns(decode_lines(data, name), name)
    if prefix_file is not None:
        _no_column("--prefix-file", prefixes, "a prefix column", prefix_file, "prefix")
        prefixes = read_prefixes(prefix_file.read_bytes(), str(prefix_file), len(lines))
    if constraints_file is not None:
        _no_column("--constraints-file", constraints, "constraint columns", constraints_file, "constraints")
        constraints = read_constraints(constraints_file.read_bytes(), str(constraints_file), len(lines))
    return lines, prefixes, constraints


def _out_lines(run, translator, request, lines: list[str], results: list) -> list[str]:  # noqa: ANN001
    """What decode prints: jsonl records, repaired trees for a parsing run (§6.3), or translations."""
    from tbuild.engine.decoding.records import jsonl_line, text_lines
    from tbuild.engine.parsing.evaluation import is_parsing, nbest_trees, style_of
    from tbuild.engine.parsing.lexical import output_text

    tok = translator.tokenizer
    if request.format == "jsonl":
        alignments = translator.alignments(lines, results) if request.align else [None] * len(lines)
        return [jsonl_line(tok, line, hyps, a) for line, hyps, a in zip(lines, results, alignments, strict=True)]
    if not is_parsing(run.spec):
        return text_lines(tok, results, request.nbest)
    # each output repaired into a tree over exactly its line's words
    form = style_of(run.spec)
    nbest, repairs = nbest_trees(results, lines, output_text(tok, form), form)
    out_lines = []
    for i, trees in enumerate(nbest):
        if request.nbest == 1:
            out_lines.append(trees[0][0] if trees else "")
        else:
            out_lines.extend([f"{i} ||| {tree} ||| {score:.4f}" for tree, score in trees]
                             or [f"{i} |||  ||| 0.0000"])
    notify(f"parsing: {repairs.summary()}")
    return out_lines


def _no_column(option: str, column: object, what: str, path: Path, kind: str) -> None:
    """Refuse a side file (``option`` at ``path``) when the input already has its ``column``, or when it
    is missing."""
    from tbuild.engine.errors import TbuildError

    if column is not None:
        raise TbuildError(f"{option}: the input already has {what}")
    if not path.is_file():
        raise TbuildError(f"{path}: {kind} file not found")
