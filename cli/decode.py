"""`tbuild decode`: translate lines from stdin or a file with beam search (§6.1)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from .common import SET_OPTION, err_console, guarded

TARGET = typer.Argument(..., help="A spec (its run directory), a run directory or a checkpoint file.")
CHECKPOINT = typer.Option(None, "--checkpoint", help="Weights to use (default: best.safetensors, else newest).")
AVERAGE = typer.Option(None, "--average", help="Average the newest K checkpoints (§6.1) and use that.")


def decode_overrides(beam: int | None, alpha: float | None, nbest: int | None, sets: list[str] | None) -> list[str]:
    overrides = list(sets or [])
    for key, value in (("beam", beam), ("alpha", alpha), ("nbest", nbest)):
        if value is not None:
            overrides.append(f"decode.{key}={value}")
    return overrides


@guarded
def decode(
    target: Path = TARGET,
    input_: Path | None = typer.Option(None, "--input", "-i", help="Read this file instead of stdin."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write here instead of stdout."),
    beam: int | None = typer.Option(None, "--beam", "-k", help="Beam size (default: the spec's decode.beam)."),
    alpha: float | None = typer.Option(None, "--alpha", help="Length penalty α (default: decode.alpha)."),
    nbest: int | None = typer.Option(None, "--nbest", help="Print the N best as `i ||| text ||| score`."),
    checkpoint: Path | None = CHECKPOINT,
    average: int | None = AVERAGE,
    set_: list[str] = SET_OPTION,
) -> None:
    """Translate one sentence per line; an empty line gives an empty line."""
    from tbuild.engine.checkpoint import atomic_write
    from tbuild.engine.decoding.translator import decode_lines, load_translator, translate
    from tbuild.engine.run_dir import resolve_target

    run = resolve_target(target, decode_overrides(beam, alpha, nbest, set_))
    name = str(input_) if input_ else "stdin"
    if input_ is not None and not input_.is_file():
        raise_error(f"{input_}: input file not found")
    data = input_.read_bytes() if input_ else sys.stdin.buffer.read()
    lines = decode_lines(data, name)
    translator = load_translator(run, checkpoint=checkpoint, average=average)

    def warn(message: str) -> None:
        err_console.print(f"[yellow]warning:[/] {name}: {message}", highlight=False, soft_wrap=True)

    show = input_ is not None and err_console.is_terminal
    with Progress(TextColumn("decoding"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=err_console, disable=not show, transient=True) as bar:
        task = bar.add_task("decode", total=len(lines))
        results = translate(translator, lines, run.spec.decode, warn, lambda n: bar.advance(task, n))
    tok = translator.tokenizer
    out_lines = []
    for i, hyps in enumerate(results):
        if run.spec.decode.nbest == 1:
            out_lines.append(tok.decode(hyps[0].tokens) if hyps else "")
        else:
            out_lines.extend(f"{i} ||| {tok.decode(h.tokens)} ||| {h.score:.4f}" for h in hyps)
            if not hyps:
                out_lines.append(f"{i} |||  ||| 0.0000")
    text = "".join(line + "\n" for line in out_lines)
    if output is not None:
        atomic_write(output, text.encode())
    else:
        sys.stdout.write(text)


def raise_error(message: str) -> None:
    from tbuild.engine.errors import TbuildError

    raise TbuildError(message)
