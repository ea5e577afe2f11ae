"""What the server serves, without HTTP: a run's endpoint (its engine, ``endpoints.py``, chosen by the run's
task) behind a
``Batcher``, the request checks, the responses and ``/info``. ``app.py`` puts it behind FastAPI."""

from __future__ import annotations

import hashlib
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from ..run.directory import Run
from .api import Limits, LinesRequest, RequestError
from .batcher import Batcher, Job, Worker
from .endpoints import Endpoint


@dataclass(frozen=True)
class Settings:
    batch_tokens: int  # the batch budget, in source tokens (padding included)
    max_wait: float  # seconds a batch waits for more requests after its first
    batching: bool  # gather requests (False: each request decoded alone)
    timeout: float  # seconds before a request is answered 503
    limits: Limits
    endpoint: str = "translate"  # the one route that decodes (its endpoint's request's ROUTE)


class Service:
    """The endpoint of a run (its engine: ``endpoints.py``), its decoding defaults and the batcher that
    feeds it (on ``worker``, the thread that loaded the engine)."""

    def __init__(self, task: Endpoint, run: Run, settings: Settings, after_batch: Any = lambda: None,
                 worker: Worker | None = None) -> None:
        self.task, self.engine, self.run, self.settings = task, task.engine, run, settings
        self.serves = {"kind": run.spec.model.kind, "endpoint": f"/{task.endpoint}"}  # named by /health, /info
        self.batcher = Batcher(task.decode, budget=settings.batch_tokens, max_wait=settings.max_wait,
                               enabled=settings.batching, after_batch=after_batch, worker=worker)
        self.closing = False

    def submit(self, request: LinesRequest) -> Future:
        """Check the request's lines against the model's limit and queue them; the future gets their
        results (n-best lists, or labels). A sampled request is decoded alone: its seed then gives what it
        gives on the command line, whatever else is queued."""
        if self.closing:
            raise RequestError(503, "the server is shutting down")
        lines = request.read()
        lengths = self.task.lengths(request, lines)
        decode = self.task.decode_request(request)
        return self.batcher.submit(Job(lines, lengths, decode, alone=decode.sampling is not None))

    def respond(self, request: LinesRequest, results: list[Any]) -> Any:
        return self.task.respond(request, results)

    def close(self, timeout: float | None = None) -> None:
        """Refuse new requests, answer the queued ones, stop the worker."""
        self.closing = True
        self.batcher.close(timeout)

    def health(self) -> dict:
        return {"status": "draining" if self.closing else "ok", **self.serves,
                "pending": self.batcher.pending(),
                **self.batcher.stats.to_json()}

    def info(self) -> dict:
        return service_info(self)


def service_info(service: Service) -> dict:
    """``GET /info``: the model, its kind and endpoint, its engine, its tokenizer, what its endpoint adds (a
    translator's languages and BLEU signatures) and its scores where evaluated: perplexity and its task's
    metrics."""
    from tbuild.builder.inspect import inspect_model

    run, spec, s = service.run, service.run.spec, service.settings
    evals = run.dir.evals()
    metrics = ("perplexity", *(m for m in spec.declared_task().metrics if m != "ppl"), "baseline_accuracy")
    return {
        "name": spec.name, **service.serves,
        "params": inspect_model(spec).total,
        "engine": service.engine.name, "precision": service.engine.precision, "weights": service.engine.weights,
        "tokenizer_sha256": hashlib.sha256(run.tokenizer.read_bytes()).hexdigest(),
        "decode": spec.decode.model_dump(),
        "batching": {"enabled": s.batching, "batch_tokens": s.batch_tokens, "max_wait_ms": round(s.max_wait * 1000),
                     "timeout_s": s.timeout},
        "limits": {"max_lines": s.limits.max_lines, "max_chars": s.limits.max_chars,
                   "max_tokens": s.limits.max_tokens},
        **service.task.info(evals),
        "scores": {e.split: {m: v for m in metrics if isinstance(v := getattr(e, m, None), float | int)}
                   for e in evals},
    }
