"""The benchmark's one table (rich) and its JSON: every row a median, tbuild's speed over each peer's
measured in the same run, MFU for training, peak memory, and why a row was skipped."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

NAMES = {"tbuild": "tbuild", "torch": "torch.nn.Transformer", "hf": "HF Marian", "ct2-float32": "CTranslate2 float32",
         "ct2-int8": "CTranslate2 int8", "ct2": "CTranslate2"}

RIGHT = ("tokens/s", "tbuild ×", "MFU", "peak memory")


def _ratio(rows: list[dict], row: dict) -> str:
    """tbuild's speed over this row's, from tbuild's row of the same comparison (a tbuild variant's own
    ratios to the peers: in its note)."""
    if row["impl"] == "tbuild" or "tokens_per_s" not in row:
        return ""
    key = ("part", "shape", "device", "precision", "search", "lengths")
    ours = next((r for r in rows if r["impl"] == "tbuild" and all(r.get(k) == row.get(k) for k in key)), None)
    ratio = (ours or {}).get("ratios", {}).get(row["impl"])
    return f"{ratio:.2f}×" if ratio is not None else ""


def _own_ratios(row: dict) -> str:
    """A tbuild variant's (bf16, int8) speed over each peer's."""
    if row["impl"] in ("tbuild", "tbuild --compile") or not row["impl"].startswith("tbuild"):
        return ""
    return "; ".join(f"{v:.2f}× {NAMES.get(k, k)}" for k, v in row.get("ratios", {}).items())


def table(report: dict) -> Table:
    hw = report["hardware"]
    where = f"{hw['cpu_model']}, {hw['threads']} threads, " + ", ".join(f for f, on in hw["flags"].items() if on)
    if hw["gpu"]:
        where += f"; GPU {hw['gpu']['name']}"
    peaks = "; ".join(f"{dev} matmul peak " + ", ".join(f"{k} {v:,.0f} GFLOP/s" for k, v in p.items())
                      for dev, p in report["peaks"].items())
    out = Table(title=f"tbuild benchmark — {where}\n{peaks}", title_justify="left")
    for name in ("part", "shape", "search", "device", "precision", "implementation", "tokens/s", "tbuild ×", "MFU",
                 "peak memory", "note"):
        out.add_column(name, justify="right" if name in RIGHT else "left")
    for row in report["rows"]:
        speed = f"{row['tokens_per_s']:,.0f}" if "tokens_per_s" in row else ""
        mfu = f"{100 * row['mfu']:.1f}%" if "mfu" in row else ""
        memory = f"{row['peak_memory_mib']:,.0f} MiB" if row.get("peak_memory_mib") else ""
        note = row.get("skipped") or row.get("error") or row.get("note", "") or _own_ratios(row)
        search = ", ".join(filter(None, (row.get("search"), row.get("lengths"))))
        out.add_row(row["part"], row["shape"], search, row["device"], row["precision"],
                    NAMES.get(row["impl"], row["impl"]), speed, _ratio(report["rows"], row), mfu, memory, note)
    if report.get("gpu_skipped"):
        out.add_row("all", "", "", "cuda", "", "", "", "", "", "", report["gpu_skipped"])
    return out


def caption(report: dict) -> str:
    """What the columns mean."""
    s = report["settings"]
    quick = "--quick: a smoke run on small sizes; its figures mean nothing. " if s["quick"] else ""
    return (f"{quick}Medians of {s['repeats']} timed rounds after {s['warmup']} warm-up, implementations interleaved. "
            "tokens/s: target tokens (training) or output tokens (decoding). tbuild ×: tbuild's speed over this "
            "row's (median of per-round ratios). MFU: model FLOPs (3 × forward on real lengths, attention "
            f"included) per second over {', '.join(sorted(set(s['mfu_peaks'].values())))}. Peak memory: "
            "resident set of the implementation's own process (CPU) or torch.cuda.max_memory_allocated (GPU).")


def show(report: dict, console: Console | None = None) -> None:
    console = console or Console(width=None if sys.stdout.isatty() else 200)
    if report["rows"] or report.get("gpu_skipped"):
        console.print(table(report))
        console.print(caption(report))
    if "real" in report:
        from .real_decoding import table as real_table

        console.print(real_table(report["real"]))


def line(row: dict) -> str:
    """One finished row as a line (printed as rows finish, so a run cut short still shows its figures)."""
    what = ", ".join(filter(None, (row["part"], row["shape"], row.get("search"), row.get("lengths"), row["device"],
                                   row["precision"], NAMES.get(row["impl"], row["impl"]))))
    if "tokens_per_s" in row:
        ratios = ", ".join(f"{NAMES.get(k, k)} {v:.2f}×" for k, v in row.get("ratios", {}).items())
        return f"{what}: {row['tokens_per_s']:,.0f} tokens/s" + (f" (tbuild ×: {ratios})" if ratios else "")
    return f"{what}: {row.get('skipped') or row.get('error') or row.get('note', '')}"


def write_json(report: dict, path: Path) -> None:
    """The report as JSON, replaced atomically (rewritten as rows finish)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(report, indent=2) + "\n")
    partial.replace(path)
