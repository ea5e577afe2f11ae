"""`tbuild card`: a run's model card (Markdown for a model hub)."""

from __future__ import annotations

from pathlib import Path

from .common import console, guarded
from .options import OUTPUT, SET_OPTION, TARGET


@guarded
def card(target: Path = TARGET, output: Path | None = OUTPUT("stdout"), set_: list[str] = SET_OPTION) -> None:
    """Write the model card: the spec as a table, parameters, FLOPs, data, tokenizer, training, sacreBLEU
    scores with their signatures, export parity, decoding, intended use and limits, the architecture."""
    from tbuild.engine.run.card import model_card, write_card
    from tbuild.engine.run.directory import resolve_run
    from tbuild.engine.tasks.registry import task_of

    run = resolve_run(target, set_)
    task = task_of(run.spec)
    task.check("card", run.spec)  # an encoder-decoder's card: its scores, decoding, its drawing
    if output is None:
        print(model_card(run, task=task.card(run)), end="")
    else:
        write_card(run, output, task=task.card(run))
        console.print(f"wrote {output}", highlight=False)
