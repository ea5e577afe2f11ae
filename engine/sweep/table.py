"""A sweep's results as one table in the layout of the paper's Table 3, with the paper's figures
beside ours and whether its trend held; written as Markdown, CSV and JSON."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from tbuild.builder.spec import Spec

from ..files import atomic_write
from .plan import PlannedRow

COLUMNS = ["row", "label", "N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "eps_ls", "positional",
           "train steps", "params ×10⁶", "dev PPL", "dev BLEU", "test BLEU", "train min", "paper PPL",
           "paper BLEU", "trend"]
SAME = 0.15  # BLEU: the paper calls a difference this small "nearly identical" (row E: 25.7 vs 25.8)


def describe(spec: Spec) -> dict:
    """The architecture columns of Table 3 for a spec (the encoder's; tbuild's rows set both stacks)."""
    m = spec.model
    stack = next(iter(m.stacks().values()))  # the encoder (a decoder-only model's decoder)
    return {"N": stack.layers, "d_model": m.d_model, "d_ff": stack.d_ff, "h": stack.heads,
            "d_k": stack.d_k or m.d_model // stack.heads, "d_v": stack.d_v or m.d_model // stack.heads,
            "P_drop": m.dropout.residual, "eps_ls": spec.train.label_smoothing, "positional": m.positional.kind}


def trend(ours: float | None, paper: float | None, ours_ref: float | None, paper_ref: float | None) -> str:
    """Did the row move against the reference row the way the paper's did (dev BLEU)?"""
    if None in (ours, paper, ours_ref, paper_ref):
        return ""
    theirs, mine = paper - paper_ref, ours - ours_ref  # type: ignore[operator]
    if abs(theirs) < SAME:
        return "held (≈)" if abs(mine) < max(SAME, 0.05 * abs(ours_ref)) else "not held (paper ≈)"  # type: ignore[arg-type]
    return "held" if mine * theirs > 0 else "not held"


def results(rows: list[PlannedRow], reference: str | None = None) -> list[dict]:
    """One dict per row, in the table's columns (None where a row has not finished)."""
    done = {p.row.name: p.result() for p in rows}
    ref_name = reference or next((p.row.name for p in rows if p.row.label == "base"), rows[0].row.name)
    ref = next((p for p in rows if p.row.name == ref_name), None)

    def dev_bleu(name: str) -> float | None:
        r = done.get(name)
        return r.score("valid", "bleu") if r else None

    out = []
    for p in rows:
        r, paper = done[p.row.name], p.row.paper
        row = {"row": p.row.name, "label": p.row.label, **describe(p.loaded.spec),
               "train steps": r.steps if r else None, "params ×10⁶": round(p.params / 1e6, 1),
               "dev PPL": r.score("valid", "ppl") if r else None, "dev BLEU": dev_bleu(p.row.name),
               "test BLEU": r.score("test", "bleu") if r else None, "train min": r.train_minutes if r else None,
               "paper PPL": paper.ppl if paper else None, "paper BLEU": paper.bleu if paper else None}
        ref_paper = ref.row.paper.bleu if ref is not None and ref.row.paper else None
        row["trend"] = "" if p is ref else trend(row["dev BLEU"], row["paper BLEU"], dev_bleu(ref_name), ref_paper)
        out.append(row)
    return out


def cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.2f}"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def group_trends(table: list[dict]) -> dict[str, str]:
    """Per label, how many of its rows moved as the paper's did, e.g. ``{"A": "3/4 held"}``."""
    out = {}
    for label in dict.fromkeys(row["label"] for row in table):
        judged = [row["trend"] for row in table if row["label"] == label and row["trend"]]
        if judged:
            out[label] = f"{sum(t.startswith('held') for t in judged)}/{len(judged)} held"
    return out


def markdown(table: list[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cell(row[c]) for c in COLUMNS) + " |" for row in table]
    return "\n".join(lines) + "\n"


def write(folder: Path, table: list[dict]) -> list[Path]:
    """results.md, .csv, .json and .png in the sweep's folder."""
    from ..figures.plots import plot_sweep

    text = io.StringIO()
    writer = csv.DictWriter(text, COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(table)
    files = {"results.md": markdown(table), "results.csv": text.getvalue(),
             "results.json": json.dumps(table, indent=1, ensure_ascii=False) + "\n"}
    for name, body in files.items():
        atomic_write(folder / name, body.encode())
    return [*(folder / name for name in files), plot_sweep(table, folder / "results.png")]
