"""`tbuild inspect`: parameters per block, totals, FLOPs per token, weight memory."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from .common import console, guarded, load, notify
from .options import SET_OPTION, SPEC_TARGET

if TYPE_CHECKING:
    from tbuild.builder.inspect import Report
    from tbuild.builder.spec import Spec


@guarded
def inspect(
    spec: Path = SPEC_TARGET,
    set_: list[str] = SET_OPTION,
    context: int = typer.Option(64, help="Sequence length n for the attention FLOPs term."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts."),
    gpus: int | None = typer.Option(None, "--gpus", help="Estimate the training wall time on this many GPUs."),
    gpu_type: str = typer.Option("h100", "--gpu-type", help="With --gpus: h200, h100, a100, l4, v100, t4 or p100."),
    mfu: float = typer.Option(0.3, "--mfu", help="With --gpus: the assumed fraction of the GPUs' peak FLOPS."),
    draw: Path | None = typer.Option(
        None, "--draw", help="Draw the architecture into this .svg or .png file (instead of the table)."),
    as_mermaid: bool = typer.Option(
        False, "--mermaid", help="Print the architecture as a mermaid flowchart (instead of the table)."),
) -> None:
    """Show what a spec builds: parameter counts per block (the paper's Table 3), FLOPs, memory."""
    from tbuild.builder.inspect import inspect_model
    from tbuild.engine.export.targets import describe_targets, export_targets

    loaded = load(spec, set_)
    if loaded.spec.model.output_head.label_set() == "from_data":  # a tagger's: counted in the training split
        from tbuild.engine.tasks.registry import task_of

        loaded = replace(loaded, spec=task_of(loaded.spec).fit_labels(loaded.spec, notify))
    report = inspect_model(loaded.spec, context=context)  # on the meta device: nothing allocated
    if draw is not None or as_mermaid:
        from tbuild.builder.diagram import diagram, mermaid
        from tbuild.engine.figures.drawing import draw as draw_diagram

        picture = diagram(loaded.spec, report, loaded.name)
        if draw is not None:
            draw_diagram(picture, draw)
            console.print(f"wrote {draw}", highlight=False)
        if as_mermaid:
            print(mermaid(picture), end="")
        return
    if as_json:
        print(json.dumps(report.to_json() | {"export": export_targets(loaded.spec)}, indent=2))
        return
    table = Table(title=f"{loaded.name}: parameters per block", title_justify="left")
    table.add_column("block")
    table.add_column("kind")
    table.add_column("params", justify="right")
    table.add_column("note", style="dim")
    for row in report.rows:
        table.add_row(row.block, row.kind, f"{row.params:,}", row.note)
    table.add_section()
    table.add_row("total", "", f"{report.total:,}", f"{report.total / 1e6:.1f}M")
    table.add_row("without embeddings", "", f"{report.non_embedding:,}", f"{report.non_embedding / 1e6:.1f}M")
    console.print(table)
    console.print(f"forward FLOPs per token (n={context}): {report.flops_per_token:,} "
                  f"({report.flops_per_token / 1e6:.1f} MFLOP)")
    console.print(f"[dim]{report.flops_formula}[/]")
    console.print(f"weights: {4 * report.total / 2**20:,.1f} MiB fp32, {2 * report.total / 2**20:,.1f} MiB bf16")
    for line in describe_targets(loaded.spec):
        console.print(f"export to {line}", highlight=False, soft_wrap=True)
    if loaded.spec.train.init is not None:
        from tbuild.engine.finetune.preview import preview_plan

        for line in preview_plan(loaded):
            console.print(line, highlight=False, soft_wrap=True)
    if gpus is not None:
        _print_estimate(loaded.spec, report, gpus, gpu_type, mfu)


def _print_estimate(spec: Spec, report: Report, gpus: int, gpu_type: str, mfu: float) -> None:
    from tbuild.builder.inspect import estimate_training
    from tbuild.engine.errors import TbuildError

    if spec.train.max_steps is None:
        stops = ", ".join(f"train.{k}" for k in ("max_minutes", "max_epochs") if getattr(spec.train, k) is not None)
        raise TbuildError(f"--gpus: the estimate needs a number of updates, and train.max_steps is not set (this "
                          f"spec stops by {stops or 'no step count'}): add --set train.max_steps=N")
    try:
        est = estimate_training(spec, report, gpus, gpu_type, mfu)
    except ValueError as e:
        raise TbuildError(str(e)) from None
    console.print(f"training estimate: {est.updates:,} updates × {est.tokens_per_update:,} target tokens × "
                  f"3 × {report.flops_per_token / 1e6:.1f} MFLOP = {est.flops_per_update * est.updates:.3g} FLOPs; "
                  f"on {gpus} × {gpu_type} at {mfu:.0%} MFU: {est.seconds / 3600:.1f} h "
                  f"({est.seconds / 60:,.0f} min)", highlight=False,
                  soft_wrap=True)
    # §5.2: 8 P100s; base 100K steps (12 hours), big 300K steps (3.5 days)
    console.print("the paper (§5.2), on 8 × p100: base 100,000 steps in 12 h, big 300,000 steps in 3.5 days (84 h)",
                  highlight=False, soft_wrap=True)
