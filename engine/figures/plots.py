"""PNG figures: training curves and attention heatmaps (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from ..errors import TbuildError
from ..run.directory import TRAIN_FILE, VALID_FILE, read_jsonl


def _pyplot() -> ModuleType:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_curves(run_dir: Path, output: Path) -> Path:
    """Training loss/NLL and validation NLL against steps (left), validation perplexity (right)."""
    train, valid = read_jsonl(run_dir / TRAIN_FILE), read_jsonl(run_dir / VALID_FILE)
    if not train:
        raise TbuildError(f"{run_dir}: no {TRAIN_FILE} to plot (has it been trained?)")
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    steps = [r["step"] for r in train]
    left.plot(steps, [r["loss"] for r in train], label="train loss (smoothed)")
    left.plot(steps, [r["nll"] for r in train], label="train NLL")
    if valid:
        left.plot([r["step"] for r in valid], [r["nll"] for r in valid], "o-", label="valid NLL")
        right.plot([r["step"] for r in valid], [r["ppl"] for r in valid], "o-", color="tab:green")
    left.set(xlabel="step", ylabel="nats per target token", title="loss")
    left.legend()
    right.set(xlabel="step", ylabel="perplexity", title="validation perplexity", yscale="log")
    fig.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=110)
    plt.close(fig)
    return output


def plot_sweep(table: list[dict], output: Path, metric: str = "dev BLEU") -> Path:
    """A sweep's dev BLEU (its ``metric`` column) per row, grouped by label (left), and the paper's own figures
    for the same rows (right), so that each group's trend can be read side by side."""
    plt = _pyplot()
    labels = list(dict.fromkeys(row["label"] for row in table))
    colors = {label: f"C{i}" for i, label in enumerate(labels)}
    names = [row["row"] for row in table]
    fig, axes = plt.subplots(1, 2, figsize=(max(8.0, 0.55 * len(names) * 2), 4.2), sharex=True)
    for ax, key, title, axis in ((axes[0], metric, "this sweep", metric),
                                 (axes[1], "paper BLEU", "the paper (Table 3)", "dev BLEU")):
        values = [row[key] if row[key] is not None else 0.0 for row in table]
        ax.bar(range(len(names)), values, color=[colors[row["label"]] for row in table])
        present = [v for row, v in zip(table, values, strict=True) if row[key] is not None]
        if present:
            ax.set_ylim(min(present) - 1.0 if min(present) > 1.0 else 0.0, max(present) + 0.5)
        ax.set(title=title, ylabel=axis)
        ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=8)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[label]) for label in labels]
    fig.legend(handles, [label or "—" for label in labels], loc="upper center", ncol=len(labels), frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=110)
    plt.close(fig)
    return output


def plot_front(points: list[dict], metric: str, output: Path) -> Path:
    """A two-objective study's trials: decode seconds (x) against the validation ``metric`` (y), each point
    labelled with its trial; the Pareto front's points joined by a line, the baseline trial ringed.
    ``points``: {trial, seconds, value, front (bool), baseline (bool)}."""
    import io

    from ..files import atomic_write

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    others = [p for p in points if not p["front"]]
    front = sorted((p for p in points if p["front"]), key=lambda p: p["seconds"])
    ax.scatter([p["seconds"] for p in others], [p["value"] for p in others], color="0.6", label="other trials")
    ax.plot([p["seconds"] for p in front], [p["value"] for p in front], "o-", color="tab:red", label="Pareto front")
    base = [p for p in points if p["baseline"]]
    ax.scatter([p["seconds"] for p in base], [p["value"] for p in base], s=160, facecolors="none",
               edgecolors="tab:blue", label="baseline (the base spec)")
    for p in points:
        ax.annotate(str(p["trial"]), (p["seconds"], p["value"]), textcoords="offset points", xytext=(4, 4),
                    fontsize=8)
    ax.set(xlabel="decode seconds (validation, median)", ylabel=f"validation {metric}",
           title="decode time against quality: each point a spec")
    ax.legend(fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    atomic_write(output, buffer.getvalue())
    return output
