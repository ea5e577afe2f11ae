"""`tbuild embed`: sentence vectors of input lines from an encoder run (engine/tasks/embedding)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from .common import err_console, guarded
from .options import CHECKPOINT, DEVICE, SET_OPTION, TARGET


@guarded
def embed(
    target: Path = TARGET,
    input_: Path | None = typer.Option(None, "--input", "-i", help="Read the lines from this file instead of stdin."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write here instead of stdout: a float32 NumPy "
                                       "array where the name ends in .npy, else one JSON array a line."),
    pooling: str | None = typer.Option(None, "--pooling", help="mean (over the input's tokens) or cls (the first "
                                       "token's state) (default: the run's head, set at import from the folder's "
                                       "pooling; else mean)."),
    checkpoint: Path | None = CHECKPOINT,
    device: str = DEVICE,
    set_: list[str] = SET_OPTION,
) -> None:
    """Write one sentence vector per input line (one JSON array a line, or -o F.npy): an encoder's final states
    pooled as the run's head says (a sentence-transformers folder's pooling and normalization, kept at
    import). A line longer than the model's limit is cut as sentence-transformers cuts it, with a warning."""
    from tbuild.engine.decoding.native import decode_lines
    from tbuild.engine.errors import TbuildError
    from tbuild.engine.files import atomic_write
    from tbuild.engine.run.directory import resolve_run
    from tbuild.engine.tasks.embedding.vectors import embed_lines, embedding_of, vector_file

    run = resolve_run(target, set_)
    embedding_of(run.spec, pooling)  # a run that is not an encoder, or a bad --pooling: before reading input
    if input_ is not None and not input_.is_file():
        raise TbuildError(f"{input_}: input file not found")
    name = str(input_) if input_ else "stdin"
    lines = decode_lines(input_.read_bytes() if input_ else sys.stdin.buffer.read(), name)

    def warn(message: str) -> None:
        err_console.print(f"[yellow]warning:[/] {message}", highlight=False, soft_wrap=True)

    vectors = embed_lines(run, lines, name, pooling=pooling, device=device, checkpoint=checkpoint, warn=warn)
    data = vector_file(vectors, npy=output is not None and output.suffix == ".npy")
    if output is not None:
        atomic_write(output, data)
    else:
        sys.stdout.write(data.decode())
