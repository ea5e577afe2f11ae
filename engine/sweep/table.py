"""A sweep's results as one table in the layout of the paper's Table 3, with the paper's figures
beside ours and whether its trend held; each row's BLEU against the reference row's with its 95% interval
and p-value (paired bootstrap, ``significance.py``); a row run over several seeds: the mean and standard
deviation over them. Written as Markdown, CSV and JSON. A task whose metric is not BLEU (``Task.headline``:
summarization's ROUGE-L) names its own in the dev and test columns."""

from __future__ import annotations

import csv
import io
import json
import statistics
from pathlib import Path

from tbuild.builder.spec import Spec

from ..files import atomic_write
from ..significance import Comparison, signed
from ..tasks.registry import task_of
from .plan import PlannedRow, by_row, reference_name

COLUMNS = ["row", "label", "N", "d_model", "d_ff", "h", "d_k", "d_v", "P_drop", "eps_ls", "positional",
           "train steps", "params ×10⁶", "seeds", "dev PPL", "dev BLEU", "dev BLEU sd", "dev Δ", "dev 95%", "dev p",
           "test BLEU", "test BLEU sd", "test Δ", "test 95%", "test p", "train min", "paper PPL", "paper BLEU",
           "trend"]
# shown only where some row has them: seeds, and comparisons with the reference row
OPTIONAL = ("seeds", "dev BLEU sd", "dev Δ", "dev 95%", "dev p", "test BLEU sd", "test Δ", "test 95%", "test p")
SPLITS = {"valid": "dev", "test": "test"}  # a split's name in the columns
METRIC = "BLEU"  # the metric as COLUMNS name it; a task's own (``Task.headline``) takes its place in our columns
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


def results(rows: list[PlannedRow], reference: str | None = None,
            compared: dict[str, dict[str, Comparison]] | None = None) -> list[dict]:
    """One dict per row (its seeds' mean; None where a row has not finished), in the table's columns;
    ``compared``: each row's comparisons with the reference row by split (``significance.compare_rows``)."""
    groups, ref_name = by_row(rows), reference_name(rows, reference)
    key, label = task_of(rows[0].loaded.spec).headline if rows else ("bleu", METRIC)
    means = {name: _means(planned, key) for name, planned in groups.items()}
    ref = groups.get(ref_name, [None])[0]
    ref_paper = ref.row.paper.bleu if ref is not None and ref.row.paper else None
    out = []
    for name, planned in groups.items():
        p, paper = planned[0], planned[0].row.paper
        row = {"row": name, "label": p.row.label, **describe(p.loaded.spec), **means[name],
               "params ×10⁶": round(p.params / 1e6, 1), "paper PPL": paper.ppl if paper else None,
               "paper BLEU": paper.bleu if paper else None}
        for split, short in SPLITS.items():
            row |= _compared((compared or {}).get(name, {}).get(split), short)
        row["trend"] = "" if name == ref_name else trend(row["dev BLEU"], row["paper BLEU"],
                                                          means.get(ref_name, {}).get("dev BLEU"), ref_paper)
        out.append({named(c, label): row[c] for c in COLUMNS})
    return out


def named(column: str, label: str) -> str:
    """``column``'s name in a table of the ``label`` metric: ours take its name (dev BLEU → dev ROUGE-L), the
    paper's keep theirs."""
    return column.replace(METRIC, label) if column.split(" ", 1)[0] in SPLITS.values() else column


def _means(planned: list[PlannedRow], key: str) -> dict:
    """A row's figures: the mean over its runs (seeds), the standard deviation of BLEU (the metric ``key``)
    where there are two or more; None until every run has finished."""
    found = [r for p in planned if (r := p.result()) is not None]
    done = len(found) == len(planned)
    seeded = planned[0].seed is not None

    def mean(values: list[float | None]) -> float | None:
        return statistics.fmean(values) if done and None not in values else None  # type: ignore[arg-type]

    def sd(values: list[float | None]) -> float | None:
        return statistics.stdev(values) if done and None not in values and len(values) > 1 else None  # type: ignore[arg-type]

    steps = mean([r.steps for r in found])
    out = {"seeds": len(found) if seeded else None, "train steps": round(steps) if steps is not None else None,
           "train min": mean([r.train_minutes for r in found])}
    for split, short in SPLITS.items():
        bleu = [r.score(split, key) for r in found]
        out |= {f"{short} BLEU": mean(bleu), f"{short} BLEU sd": sd(bleu)}
    out["dev PPL"] = mean([r.score("valid", "ppl") for r in found])
    return out


def _compared(c: Comparison | None, short: str) -> dict:
    """A comparison's columns: the difference, its 95% interval and the p-value."""
    if c is None:
        return {f"{short} Δ": None, f"{short} 95%": None, f"{short} p": None}
    s = c.difference_spread
    return {f"{short} Δ": c.difference, f"{short} 95%": f"{signed(s.lower)} to {signed(s.upper)}",
            f"{short} p": c.p_value}


def columns(table: list[dict]) -> list[str]:
    """The table's columns (its rows' own names; COLUMNS for none): the optional ones where some row has a value."""
    label = _label(table)
    return [named(c, label) for c in COLUMNS
            if c not in OPTIONAL or any(row.get(named(c, label)) is not None for row in table)]


def _label(table: list[dict]) -> str:
    """The metric the table's columns name (``METRIC`` unless its task's headline renamed them)."""
    return next((c.removeprefix("dev ") for c in (table[0] if table else ())
                 if c.startswith("dev ") and c.count(" ") == 1 and c not in ("dev PPL", *OPTIONAL)), METRIC)


def cell(value: object, column: str = "") -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}" if column.endswith(" p") else (signed(value) if column.endswith("Δ") else f"{value:.2f}")
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
    shown = columns(table)
    lines = ["| " + " | ".join(shown) + " |", "|" + "---|" * len(shown)]
    lines += ["| " + " | ".join(cell(row[c], c) for c in shown) + " |" for row in table]
    return "\n".join(lines) + "\n"


def write(folder: Path, table: list[dict]) -> list[Path]:
    """results.md, .csv, .json and .png in the sweep's folder."""
    from ..figures.plots import plot_sweep

    text = io.StringIO()
    writer = csv.DictWriter(text, columns(table), lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(table)
    files = {"results.md": markdown(table), "results.csv": text.getvalue(),
             "results.json": json.dumps(table, indent=1, ensure_ascii=False) + "\n"}
    for name, body in files.items():
        atomic_write(folder / name, body.encode())
    return [*(folder / name for name in files), plot_sweep(table, folder / "results.png", f"dev {_label(table)}")]
