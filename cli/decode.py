"""`tbuild decode`: translate lines from stdin or a file with beam search (§6.1)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from .common import err_console, guarded, notify
from .options import (
    ALPHA,
    AVERAGE,
    BEAM,
    CHECKPOINT,
    DEVICE,
    ENGINE,
    QUANTIZATION,
    SET_OPTION,
    TARGET,
    decode_overrides,
)


@guarded
def decode(
    target: Path = TARGET,
    input_: Path | None = typer.Option(None, "--input", "-i", help="Read this file instead of stdin."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write here instead of stdout."),
    beam: int | None = BEAM,
    alpha: float | None = ALPHA,
    nbest: int | None = typer.Option(None, "--nbest", help="Print the N best as `i ||| text ||| score`."),
    checkpoint: Path | None = CHECKPOINT,
    average: int | None = AVERAGE,
    device: str = DEVICE,
    engine: str = ENGINE,
    quantization: str | None = QUANTIZATION,
    set_: list[str] = SET_OPTION,
) -> None:
    """Translate one sentence per line; an empty line gives an empty line."""
    from tbuild.engine.decoding.engines import load_engine
    from tbuild.engine.decoding.translator import decode_lines
    from tbuild.engine.errors import TbuildError
    from tbuild.engine.files import atomic_write
    from tbuild.engine.parsing.evaluation import is_parsing, nbest_trees, style_of
    from tbuild.engine.process import configure_process
    from tbuild.engine.run_dir import resolve_run

    run = resolve_run(target, decode_overrides(beam, alpha, nbest, set_))
    name = str(input_) if input_ else "stdin"
    if input_ is not None and not input_.is_file():
        raise TbuildError(f"{input_}: input file not found")
    data = input_.read_bytes() if input_ else sys.stdin.buffer.read()
    lines = decode_lines(data, name)
    process = configure_process()

    def warn(message: str) -> None:
        err_console.print(f"[yellow]warning:[/] {name}: {message}", highlight=False, soft_wrap=True)

    translator = load_engine(run, engine, quantization=quantization, checkpoint=checkpoint, average=average,
                             device=device, notify=notify)

    show = input_ is not None and err_console.is_terminal
    with Progress(TextColumn("decoding"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=err_console, disable=not show, transient=True) as bar:
        task = bar.add_task("decode", total=len(lines))
        results = translator.translate(lines, run.spec.decode, warn, lambda n: bar.advance(task, n),
                                       after_batch=process.after_batch)
    tok = translator.tokenizer
    out_lines = []
    if is_parsing(run.spec):  # §6.3: each output repaired into a tree over exactly its line's words
        nbest, repairs = nbest_trees(results, lines, tok.decode, style_of(run.spec))
        for i, trees in enumerate(nbest):
            if run.spec.decode.nbest == 1:
                out_lines.append(trees[0][0] if trees else "")
            else:
                out_lines.extend([f"{i} ||| {tree} ||| {score:.4f}" for tree, score in trees]
                                 or [f"{i} |||  ||| 0.0000"])
        notify(f"parsing: {repairs.summary()}")
        results = []
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
