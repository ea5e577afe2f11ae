"""`tbuild precision`: the CPU bf16 probes this machine has cached (what `precision: auto` reads), and --clear."""

from __future__ import annotations

import typer

from .common import console, guarded


@guarded
def precision(
    clear: bool = typer.Option(False, "--clear", help="Forget every cached probe: the next run measures again."),
) -> None:
    """The bf16 probes cached for `precision: auto` (per CPU, torch version, threads and model widths): bf16's
    speed over fp32's and when it was measured. A probe taken on a busy machine is never cached, and training
    confirms the choice from its own first steps (docs/training.md)."""
    from rich.table import Table

    from tbuild.engine.device.precision import cache_dir, cached_probes, clear_probes

    path = cache_dir() / "precision.json"
    if clear:
        console.print(f"cleared {clear_probes()} cached probe(s) from {path}", highlight=False)
        return
    probes = cached_probes()
    if not probes:
        console.print(f"no cached probe in {path}: the next run with precision auto on a CPU measures", highlight=False)
        return
    table = Table("CPU", "threads", "torch", "d_model", "d_ff", "fp32 GFLOP/s", "bf16 GFLOP/s", "bf16 / fp32",
                  "measured", title=str(path))
    for c in probes:
        table.add_row(c.machine.get("cpu", "?"), c.machine.get("threads", "?"), c.machine.get("torch", "?"),
                      str(c.widths[0]), str(c.widths[1]), f"{c.probe.fp32_gflops:.1f}", f"{c.probe.bf16_gflops:.1f}",
                      f"{c.probe.ratio:.2f}×", c.measured)
    console.print(table)
