"""Draw a spec's ``Diagram`` (``builder/diagram.py``) with matplotlib: a column per stack the model has
(the encoder on the left, the decoder on the right; one column for a decoder-only or encoder-only
model), bottom to top as in the paper's Figure 1, the output (or head) on top of the last, the encoder's
output feeding each decoder group with cross-attention. SVG or PNG by the file's suffix."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tbuild.builder.diagram import Box, Diagram

from ..errors import TbuildError

if TYPE_CHECKING:
    from matplotlib.axes import Axes

LINE = 0.22  # inches per text line
GAP = 0.35  # inches between boxes
WIDTH = 4.6  # inches per column
COLOURS = {"emb": "#fde7c8", "layer": "#dbe9f6", "cross": "#d9f0dc", "norm": "#eeeeee", "out": "#f6d6d6"}


def _height(box: Box) -> float:
    return LINE * (len(box.lines) + 1) + 0.2


def _colour(box: Box) -> str:
    if box.key.endswith("emb"):
        return COLOURS["emb"]
    if box.key.endswith("norm"):
        return COLOURS["norm"]
    return COLOURS["cross"] if box.cross else COLOURS["layer"]


def _column(ax: Axes, boxes: tuple[Box, ...], x: float, y: float) -> dict[str, tuple[float, float]]:
    """Draw ``boxes`` upwards from ``y``; returns each box's (bottom, top)."""
    from matplotlib.patches import FancyBboxPatch

    spans = {}
    for i, box in enumerate(boxes):
        h = _height(box)
        ax.add_patch(FancyBboxPatch((x, y), WIDTH - 0.4, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                    facecolor=box.key == "out" and COLOURS["out"] or _colour(box),
                                    edgecolor="#555555", linewidth=1))
        ax.text(x + 0.1, y + h - 0.12, box.title, fontsize=8.5, fontweight="bold", va="top")
        for n, line in enumerate(box.lines):
            ax.text(x + 0.1, y + h - 0.12 - LINE * (n + 1), line, fontsize=7.5, va="top")
        spans[box.key] = (y, y + h)
        if i:
            ax.annotate("", (x + WIDTH / 2 - 0.2, y), (x + WIDTH / 2 - 0.2, y - GAP),
                        arrowprops={"arrowstyle": "->", "color": "#333333"})
        y += h + GAP
    return spans


def draw(d: Diagram, path: Path) -> None:
    """Write the drawing to ``path`` (.svg or .png)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if path.suffix.lower() not in (".svg", ".png"):
        raise TbuildError(f"--draw {path}: the file must end in .svg or .png")
    columns = [(name, boxes + ((d.output,) if n == len(d.stacks) - 1 else ()))
               for n, (name, boxes) in enumerate(d.stacks)]  # the output on top of the last stack
    top = max(sum(_height(b) + GAP for b in boxes) for _, boxes in columns) + 0.3
    width = max(len(columns), 2) * WIDTH  # one stack: room for the notes below it
    fig = plt.figure(figsize=(width, top + 0.8 + LINE * len(d.notes)))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(-0.2 - LINE * len(d.notes), top + 0.6)
    ax.axis("off")
    ax.text(0.2, top + 0.35, d.name, fontsize=12, fontweight="bold", va="center")
    spans: dict[str, tuple[float, float]] = {}
    for n, (name, boxes) in enumerate(columns):
        ax.text(n * WIDTH + 0.2, top + 0.05, name.capitalize(), fontsize=10, va="center")
        spans |= _column(ax, boxes, n * WIDTH + 0.2, 0.2)
    for box in d.decoder:
        if box.cross:
            enc_top = spans[d.encoder[-1].key][1]
            bottom, topy = spans[box.key]
            ax.annotate("", (WIDTH + 0.2, (bottom + topy) / 2), (WIDTH - 0.2, enc_top - 0.1),
                        arrowprops={"arrowstyle": "->", "color": "#2a7a3b", "linestyle": "--",
                                    "connectionstyle": "arc3,rad=-0.15"})
    for n, note in enumerate(d.notes):
        ax.text(0.2, -LINE * (n + 0.5), note, fontsize=8, color="#444444", va="center")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
