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
    best_ppl: float = math.inf

    def meta(self) -> dict[str, Any]:
        version, internal, gauss = random.getstate()
        return {"step": self.step, "epoch": self.epoch, "batch_index": self.batch_index,
                "elapsed": self.elapsed, "best_ppl": self.best_ppl if math.isfinite(self.best_ppl) else None,
                "python_rng": [version, list(internal), gauss]}

    @classmethod
    def from_meta(cls, meta: dict[str, Any]) -> TrainState:
        """The state saved in ``meta``; restores the Python RNG saved with it."""
        version, internal, gauss = meta["python_rng"]
        random.setstate((version, tuple(internal), gauss))
        return cls(step=meta["step"], epoch=meta["epoch"], batch_index=meta["batch_index"],
                   elapsed=meta["elapsed"], best_ppl=meta.get("best_ppl") or math.inf)


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
