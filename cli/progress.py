"""Training progress for the commands that train (train, sweep): a rich progress bar on a terminal,
plain log lines elsewhere (CI)."""

from __future__ import annotations

import math
from typing import Any

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from .common import console, err_console


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
        score = f" {r['metric']} {r['score']:.2f}" if r.get("metric", "ppl") != "ppl" else ""
        self.print(f"[cyan]valid[/] step {r['step']} epoch {r['epoch']}: loss {r['loss']:.3f} "
                   f"nll {r['nll']:.3f} ppl {r['ppl']:.2f}{score}{best}")

    def on_epoch(self, r: dict[str, Any]) -> None:
        if self.progress is None:
            self.print(f"epoch {r['epoch']} done at step {r['step']}")

    def on_checkpoint(self, r: dict[str, Any]) -> None:
        if self.progress is None:
            self.print(f"checkpoint at step {r['step']}")

    def on_info(self, r: dict[str, Any]) -> None:
        self.print(r["message"])

    def on_warning(self, r: dict[str, Any]) -> None:
        (self.progress.console if self.progress else err_console).print(
            f"[yellow]warning:[/] {r['message']}", highlight=False, soft_wrap=True)

    def on_end(self, r: dict[str, Any]) -> None:
        if self.progress is not None:
            self.progress.stop()
        best = "".join(f", best validation {name} {value:.2f}" for name, value in _bests(r))
        self.print(f"stopped at step {r['step']}: {r['why']} ({r['elapsed_call'] / 60:.1f} min this time, "
                   f"{r['elapsed'] / 60:.1f} in all{best})")

    def on_stopped(self, r: dict[str, Any]) -> None:
        """Training ended by its caller before the trainer's end (a tune trial pruned or failed)."""
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
        self.print(f"stopped: {r['why']}")

    def on_other(self, r: dict[str, Any]) -> None:
        pass


def _bests(r: dict[str, Any]) -> list[tuple[str, float]]:
    """The run's best validation scores: by ``train.select``'s metric (where not ppl), then perplexity."""
    bests = []
    if r.get("metric", "ppl") != "ppl" and r.get("best_score") is not None:
        bests.append((r["metric"], r["best_score"]))
    if r.get("best_ppl") is not None and math.isfinite(r["best_ppl"]):
        bests.append(("ppl", r["best_ppl"]))
    return bests


class Quiet:
    """The events of a process other than the main one: none shown but warnings (errors are raised)."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "warning":
            err_console.print(f"[yellow]warning (rank {self.rank}):[/] {data['message']}")
