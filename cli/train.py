"""`tbuild train`: train a spec with a live progress display (plain log lines when not on a terminal)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from .common import console, err_console, guarded, load
from .options import DEVICE, SET_OPTION


class Reporter:
    """Renders training events: a rich progress bar on a terminal, periodic lines elsewhere (CI)."""

    def __init__(self) -> None:
        self.live = console.is_terminal
        self.progress: Progress | None = None
        self.task: Any = None

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        getattr(self, f"on_{kind}", self.on_other)(data)

    def print(self, text: str) -> None:
        (self.progress.console if self.progress else console).print(text, highlight=False, soft_wrap=True)

    def on_start(self, data: dict[str, Any]) -> None:
        self.print(f"run directory: {data['run_dir']}")
        if self.live:
            self.progress = Progress(
                TextColumn("[bold]step"), MofNCompleteColumn(), BarColumn(), TextColumn("{task.fields[stats]}"),
                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=console, transient=False,
            )
            self.progress.start()
            self.task = self.progress.add_task("train", total=data["max_steps"], completed=data["step"], stats="")

    def on_log(self, r: dict[str, Any]) -> None:
        stats = (f"epoch {r['epoch']} loss {r['loss']:.3f} ppl {r['ppl']:.2f} lr {r['lr']:.2e} "
                 f"{r['tokens_per_s']:,.0f} tok/s")
        if self.progress is not None:
            self.progress.update(self.task, completed=r["step"], stats=stats)
        else:
            self.print(f"step {r['step']} {stats} |g| {r['grad_norm']:.2f} {r['elapsed']:.0f}s")

    def on_valid(self, r: dict[str, Any]) -> None:
        best = " (best)" if r.get("best") else ""
        self.print(f"[cyan]valid[/] step {r['step']} epoch {r['epoch']}: loss {r['loss']:.3f} "
                   f"nll {r['nll']:.3f} ppl {r['ppl']:.2f}{best}")

    def on_epoch(self, r: dict[str, Any]) -> None:
        if self.progress is None:
            self.print(f"epoch {r['epoch']} done at step {r['step']}")

    def on_checkpoint(self, r: dict[str, Any]) -> None:
        if self.progress is None:
            self.print(f"checkpoint at step {r['step']}")

    def on_info(self, r: dict[str, Any]) -> None:
        self.print(r["message"])

    def on_warning(self, r: dict[str, Any]) -> None:
        (self.progress.console if self.progress else err_console).print(f"[yellow]warning:[/] {r['message']}")

    def on_end(self, r: dict[str, Any]) -> None:
        if self.progress is not None:
            self.progress.stop()
        best = f", best validation ppl {r['best_ppl']:.2f}" if math.isfinite(r["best_ppl"]) else ""
        self.print(f"stopped ({r['reason']}) at step {r['step']} after {r['elapsed'] / 60:.1f} min{best}")

    def on_other(self, r: dict[str, Any]) -> None:
        pass


@guarded
def train(
    spec: Path = typer.Argument(..., help="A spec file (its run directory is runs/<name> unless output_dir is set)."),
    set_: list[str] = SET_OPTION,
    minutes: float | None = typer.Option(None, help="Stop after this many minutes (sets train.max_minutes)."),
    fresh: bool = typer.Option(False, "--fresh", help="Delete the run directory and start over."),
    device: str = DEVICE,
) -> None:
    """Train a spec; re-running on the same run directory resumes where it stopped."""
    from tbuild.engine.policy import choose_policy
    from tbuild.engine.process import configure_process
    from tbuild.engine.training.trainer import Trainer

    overrides = list(set_ or []) + ([f"train.max_minutes={minutes}"] if minutes else [])
    loaded = load(spec, overrides)
    process = configure_process(loaded.spec.train.threads)
    policy = choose_policy(loaded.spec.train.precision, device)
    trainer = Trainer(loaded, Reporter(), policy=policy, after_step=process.after_step, fresh=fresh)
    result = trainer.setup().train()
    if result["reason"] == "interrupted":
        err_console.print(f"interrupted at step {result['step']}: checkpoint saved; run the same command to resume")
        raise typer.Exit(130)
