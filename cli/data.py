"""`tbuild data`: fetch a spec's data set, or Multi30k alone."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import Command, Group, console, guarded, load
from .options import MIRROR, SET_OPTION, SPEC_TARGET

data_app = typer.Typer(cls=Group, help="Fetch built-in data sets; prepare a spec's training data.",
                       no_args_is_help=True)


@data_app.callback()
def _group() -> None:
    """Fetch built-in data sets; prepare a spec's training data."""  # keeps commands subcommands


@data_app.command(cls=Command)
@guarded
def multi30k(
    output: Path = typer.Option(Path("data/multi30k"), "--output", "-o", help="Folder to put the .gz files in."),
    mirror: Path | None = MIRROR,
) -> None:
    """Multi30k Task 1 (en/de/fr raw text): train, val, test2016, checked against their sha256."""
    from tbuild.engine.data.multi30k import fetch_multi30k

    written = fetch_multi30k(output, mirror=mirror)
    for path in written:
        console.print(f"fetched {path}", highlight=False)
    if not written:
        console.print(f"Multi30k already present in {output} (sha256 checked)", highlight=False)
    else:
        console.print(f"{len(written)} files in {output}", highlight=False)


@data_app.command(cls=Command)
@guarded
def fetch(
    spec: Path = SPEC_TARGET,
    set_: list[str] = SET_OPTION,
    mirror: Path | None = MIRROR,
) -> None:
    """Put the spec's data files in place: its data set (data.dataset) fetches the missing ones and
    checks them; own files (`files` or none) are checked to exist."""
    from tbuild.engine.data.corpus import SPLITS, split_paths
    from tbuild.engine.data.datasets import fetch_data

    data = load(spec, set_).spec.data

    def log(line: str) -> None:
        console.print(line, highlight=False, soft_wrap=True)

    fetch_data(data, log, mirror=mirror)
    for split in SPLITS:
        if getattr(data, split) is not None:
            files = ", ".join(map(str, split_paths(data, split)))  # a language model's text: one file
            console.print(f"data.{split}: {files}", highlight=False, soft_wrap=True)


@data_app.command(cls=Command)
@guarded
def prepare(
    spec: Path = SPEC_TARGET,
    workers: int | None = typer.Option(None, "--processes", help="Encoding processes (default: the cores, at most "
                                       "8)."),
    set_: list[str] = SET_OPTION,
) -> None:
    """Train the run's tokenizer if needed, then encode, filter and memory-map the training split into
    RUN/prepared/train (what `tbuild train` does first; reused while the tokenizer, filters and files
    are unchanged)."""
    from tbuild.engine.run.directory import run_dir_of
    from tbuild.engine.tasks.registry import task_of

    loaded = load(spec, set_)
    run = run_dir_of(loaded)

    def info(message: str) -> None:
        console.print(message, highlight=False, soft_wrap=True)

    pairs = task_of(loaded.spec).prepare(loaded.spec.model_copy(update={"name": loaded.name}), run, info,
                                         workers=workers)
    size = sum(p.stat().st_size for p in pairs.folder.iterdir())
    stacked = f" ({len(pairs.variants)} sampled variants stacked)" if pairs.variants else ""
    info(f"{len(pairs):,} pairs{stacked}, {pairs.header['tokens']['src']:,} + {pairs.header['tokens']['tgt']:,} tokens "
         f"({pairs.header['dtype']}), {size / 2**20:,.1f} MiB in {pairs.folder}")
