"""PNG figures: training curves and attention heatmaps (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path

from .errors import TbuildError
from .training.metrics import TRAIN_FILE, VALID_FILE, read_jsonl


def _pyplot():  # noqa: ANN202
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
