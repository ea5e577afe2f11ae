"""`tbuild merge`: fold an adapter run's low-rank updates into its base's weights, as an ordinary run."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import console, guarded
from .options import CHECKPOINT


@guarded
def merge(
    target: Path = typer.Argument(..., help="An adapter run (its directory, spec or a checkpoint file)."),
    output: Path = typer.Option(..., "--output", "-o", help="The merged run's folder (new or empty)."),
    checkpoint: Path | None = CHECKPOINT,
    peft: Path | None = typer.Option(None, "--peft", help="Also write the adapters in peft's format (adapter_config"
                                     ".json, adapter_model.safetensors) for the base's Hugging Face export, here."),
) -> None:
    """Write an adapter run (train.adapters) as an ordinary run: W + (alpha/r)·B A in every adapted weight."""
    from tbuild.engine.export.peft import write_peft
    from tbuild.engine.run.directory import resolve_run
    from tbuild.engine.run.merge import check_merge, merge_run
    from tbuild.engine.tasks.registry import task_of

    run = resolve_run(target)
    check_merge(run, output)
    if peft is not None:  # its refusals (a kind without Hugging Face names) come before the merged run is written
        count = write_peft(run, peft, task_of(run.spec).peft_type, checkpoint=checkpoint)
    merged, tokenizer = merge_run(run, output, checkpoint=checkpoint)
    console.print(f"merged {run.dir.path / merged} into its base -> {output} (best.safetensors, spec.yaml, "
                  f"{tokenizer})", highlight=False)
    if peft is not None:
        console.print(f"peft: {count} adapted modules -> {peft}", highlight=False)
