"""What a resumed run needs besides tensors, and the clean-stop signal."""

from __future__ import annotations

import math
import random
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass
class TrainState:
    """Progress saved in every checkpoint's metadata; with the Python RNG it makes resume exact."""

    step: int = 0
    epoch: int = 0
    batch_index: int = 0  # next batch of `epoch` to use
    elapsed: float = 0.0  # training seconds across resumes
    best_ppl: float = math.inf  # the lowest validation perplexity, whatever train.select.metric is
    metric: str = "ppl"  # train.select.metric that best_score and stale count in
    best_score: float | None = None  # the best validation score by that metric (None: no validation yet)
    stale: int = 0  # validations in a row since the last better score (train.select.patience)
    precision: str | None = None  # auto's precision as the run's own steps measured it (precision_check.py)
    precision_cpu: str | None = None  # the CPU that measured it (precision_check.cpu_key)

    def meta(self) -> dict[str, Any]:
        version, internal, gauss = random.getstate()
        return {"step": self.step, "epoch": self.epoch, "batch_index": self.batch_index,
                "elapsed": self.elapsed, "best_ppl": self.best_ppl if math.isfinite(self.best_ppl) else None,
                "metric": self.metric, "best_score": self.best_score, "stale_validations": self.stale,
                "precision": self.precision, "precision_cpu": self.precision_cpu,
                "python_rng": [version, list(internal), gauss]}

    @classmethod
    def from_meta(cls, meta: dict[str, Any]) -> TrainState:
        """The state saved in ``meta``; restores the Python RNG saved with it. A checkpoint written before
        ``train.select`` existed chose by perplexity: its best score is its best perplexity."""
        version, internal, gauss = meta["python_rng"]
        random.setstate((version, tuple(internal), gauss))
        best_ppl = meta.get("best_ppl") or math.inf
        metric = meta.get("metric", "ppl")
        fallback = best_ppl if metric == "ppl" and math.isfinite(best_ppl) else None
        return cls(step=meta["step"], epoch=meta["epoch"], batch_index=meta["batch_index"],
                   elapsed=meta["elapsed"], best_ppl=best_ppl, metric=metric,
                   best_score=meta.get("best_score", fallback), stale=meta.get("stale_validations", 0),
                   precision=meta.get("precision"), precision_cpu=meta.get("precision_cpu"))

    def select(self, metric: str) -> bool:
        """Score validations by ``metric`` from now on; True when that starts the best score over (the
        metric differs from the one the saved best score is in)."""
        if metric == self.metric:
            return False
        self.metric, self.best_score, self.stale = metric, None, 0
        return True

    def record(self, score: float, *, lower_is_better: bool) -> bool:
        """Count a validation's ``score``: True (and the new best) when it beats the best so far; equal is
        not better, and neither is NaN (a diverged model). Otherwise one more stale validation."""
        best = self.best_score
        better = not math.isnan(score) and (best is None or (score < best if lower_is_better else score > best))
        if better:
            self.best_score, self.stale = score, 0
        else:
            self.stale += 1
        return better


class StopSignal:
    """Ctrl-C / SIGTERM request a clean stop at the next step boundary; a second Ctrl-C stops at once.
    Only a second SIGINT does: under torchrun a Ctrl-C reaches the workers and torchrun, which then
    sends them SIGTERM, and that must not turn the clean stop into an abrupt one."""

    def __init__(self) -> None:
        self.requested = False

    @contextmanager
    def installed(self) -> Iterator[None]:
        interrupts = 0

        def handler(signum: int, frame: Any) -> None:  # noqa: ARG001
            nonlocal interrupts
            interrupts += signum == signal.SIGINT
            if interrupts > 1:
                raise KeyboardInterrupt
            self.requested = True

        previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, h in previous.items():
                signal.signal(s, h)
