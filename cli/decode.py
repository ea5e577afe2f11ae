"""`tbuild decode`: translate lines from stdin or a file with beam search (§6.1) or sampling, one run
or an ensemble of runs."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
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
    engine_loading,
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
    from tbuild.engine.decoding.request import DecodeRequest
    from tbuild.engine.files import atomic_write
    from tbuild.engine.tasks.base import DecodeCall
    from tbuild.engine.tasks.registry import task_of

    DecodeRequest(format=format_, align=align)  # a bad --format or --align is refused before any run is read
    runs = decode_runs(targets, set_, ensembling.profile, beam=search.beam, alpha=search.alpha,
                       stopping=search.stopping, patience=search.patience, nbest=nbest, sampling=sampling, topk=topk,
                       topp=topp, temperature=temperature, seed=seed, no_repeat_ngram=no_repeat_ngram,
                       precision=loading.precision)
    name = str(input_) if input_ else "stdin"

    def warn(message: str) -> None:
        err_console.print(f"[yellow]warning:[/] {name}: {message}", highlight=False, soft_wrap=True)

    engine = engine_loading(loading, ensembling)
    call = DecodeCall(read=lambda: _read(input_), name=name, prefix_file=prefix_file,
                      constraints_file=constraints_file, format=format_, align=align,
                      loading=engine, load_decoder=lambda: load_decoder(runs, engine, notify),
                      notify=notify, warn=warn, progress=_progress(input_ is not None and err_console.is_terminal))
    text = "".join(line + "\n" for line in task_of(runs[0].spec).decode(runs, call))
    if output is not None:
        atomic_write(output, text.encode())
    else:
        sys.stdout.write(text)


def _read(input_: Path | None) -> bytes:
    """The input's bytes: the file's, or stdin's without one."""
    from tbuild.engine.errors import TbuildError

    if input_ is not None and not input_.is_file():
        raise TbuildError(f"{input_}: input file not found")
    return input_.read_bytes() if input_ else sys.stdin.buffer.read()


def _progress(show: bool) -> Callable[[int], AbstractContextManager[Callable[[int], None]]]:
    """The decoding progress bar on stderr (shown when ``show``): ``progress(total)`` gives ``advance(n)``."""
    @contextmanager
    def progress(total: int) -> Iterator[Callable[[int], None]]:
        with Progress(TextColumn("decoding"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      console=err_console, disable=not show, transient=True) as bar:
            task = bar.add_task("decode", total=total)
            yield lambda n: bar.advance(task, n)

    return progress
