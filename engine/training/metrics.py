"""Writing metrics.jsonl (training) and valid.jsonl (validation) in the run directory (their names and
reader: ``run/directory.py``)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from ..run.directory import TRAIN_FILE, VALID_FILE, read_jsonl


class MetricsLog:
    """The JSON-lines logs, and the experiment trackers of ``train.log`` (``loggers.py``) beside them."""

    def __init__(self, run_dir: Path, trackers: list | None = None) -> None:
        self.train_path, self.valid_path = run_dir / TRAIN_FILE, run_dir / VALID_FILE
        self.trackers = trackers or []

    def truncate_after(self, step: int) -> None:
        """Forget records past ``step`` (written after the checkpoint a resumed run starts from)."""
        for path in (self.train_path, self.valid_path):
            kept = [r for r in read_jsonl(path) if r.get("step", 0) <= step]
            if path.exists():
                path.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")

    def _append(self, path: Path, record: dict[str, Any]) -> None:
        with path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    def write_train(self, record: dict[str, Any]) -> None:
        self._append(self.train_path, record)
        for tracker in self.trackers:
            tracker.train(record)

    def write_valid(self, record: dict[str, Any]) -> None:
        self._append(self.valid_path, record)
        for tracker in self.trackers:
            tracker.valid(record)

    def close(self) -> None:
        for tracker in self.trackers:
            tracker.close()


class LogWindow:
    """Training statistics summed since the last log line."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.loss: Any = 0.0  # sums of the steps' values, which may be device tensors until ``record``
        self.nll: Any = 0.0
        self.grad_norm: Any = 0.0
        self.tokens = self.steps = 0
        self.started = time.monotonic()

    def add(self, step: dict[str, Any]) -> None:
        self.loss += step["loss"]
        self.nll += step["nll"]
        self.tokens += int(step["tokens"])
        self.grad_norm += step["grad_norm"]
        self.steps += 1

    def record(self, step: int, epoch: int, elapsed: float, lr: float) -> dict[str, Any]:
        """Per-token loss and NLL, perplexity, tokens/s and mean gradient norm of the window; then reset."""
        n = max(self.tokens, 1)
        loss, nll, grad_norm = float(self.loss), float(self.nll), float(self.grad_norm)  # one device sync
        record = {"step": step, "epoch": epoch, "loss": loss / n, "nll": nll / n,
                  "ppl": math.exp(min(nll / n, 50.0)), "lr": lr,
                  "tokens_per_s": self.tokens / max(time.monotonic() - self.started, 1e-9),
                  "grad_norm": grad_norm / max(self.steps, 1), "elapsed": elapsed}
        self.reset()
        return record
