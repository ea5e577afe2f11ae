"""A run served: its task's endpoint (``Task.serve``: the engine and the route) behind the serving layer's
``Service`` (batcher, limits, ``/info``). Here, above both, so that serving never asks which task a run is."""

from __future__ import annotations

from typing import Any

from ..errors import TbuildError
from ..run.directory import Run
from ..serving.api import Limits
from ..serving.batcher import Worker
from ..serving.service import Service, Settings
from .base import Loading
from .registry import task_of


def open_service(run: Run, *, engine: str = "native", quantization: str | None = None, device: str = "auto",
                 checkpoint: Any = None, average: int | None = None, batch_tokens: int | None = None,
                 max_wait_ms: float = 10.0, batching: bool = True, timeout: float = 30.0, max_lines: int = 256,
                 max_chars: int = 2000, after_batch: Any = lambda: None, notify: Any = lambda _: None,
                 compiled: bool = False) -> Service:
    """Load the run's endpoint (its task's ``serve``: the engine and the route) and put it behind a batcher,
    both on one thread (``Worker``: a model decoded on another thread than loaded it is about 2× slower)."""
    for name, value in (("--batch-tokens", batch_tokens or 1), ("--max-lines", max_lines), ("--max-chars", max_chars),
                        ("--timeout", timeout)):
        if value <= 0:
            raise TbuildError(f"{name} must be positive, not {value}")
    if max_wait_ms < 0:
        raise TbuildError(f"--max-wait-ms must be 0 or more, not {max_wait_ms}")
    budget = batch_tokens or run.spec.decode.batch_tokens
    loading = Loading(checkpoint, average, device, compiled, engine, quantization)
    worker = Worker()
    try:
        task = worker.call(lambda: task_of(run.spec).serve(run, budget, loading, notify)).result()
    except BaseException:
        worker.close()
        raise
    settings = Settings(budget, max_wait_ms / 1000, batching, timeout, Limits(max_lines, max_chars, task.max_tokens),
                        task.endpoint)
    return Service(task, run, settings, after_batch, worker)
