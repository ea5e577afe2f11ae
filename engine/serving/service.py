"""What the server serves, without HTTP: an engine behind a ``Batcher``, the request checks, the
responses and ``/info``. ``app.py`` puts it behind FastAPI."""

from __future__ import annotations

import hashlib
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from ..decoding.engines import Engine
from ..decoding.request import DecodeRequest, InvalidRequest
from ..decoding.search import Hypothesis
from ..run_dir import Run
from .api import Hyp, Limits, RequestError, TranslateRequest, TranslateResponse, check_lengths
from .batcher import Batcher, Job


@dataclass(frozen=True)
class Settings:
    batch_tokens: int  # the batch budget, in source tokens (padding included)
    max_wait: float  # seconds a batch waits for more requests after its first
    batching: bool  # gather requests (False: each request decoded alone)
    timeout: float  # seconds before a request is answered 503
    limits: Limits


class Service:
    """The engine of a run, its decoding defaults and the batcher that feeds it."""

    def __init__(self, engine: Engine, run: Run, settings: Settings, after_batch: Any = lambda: None) -> None:
        self.engine, self.run, self.settings = engine, run, settings
        self.batcher = Batcher(engine.translate, budget=settings.batch_tokens, max_wait=settings.max_wait,
                               enabled=settings.batching, after_batch=after_batch)
        self.closing = False

    def decode_request(self, request: TranslateRequest) -> DecodeRequest:
        """The spec's decoding options with the request's beam, α and n-best (422 if they clash)."""
        update = {k: v for k, v in (("beam", request.beam), ("alpha", request.alpha), ("nbest", request.nbest))
                  if v is not None}
        try:
            return DecodeRequest.of(self.run.spec.decode, batch_tokens=self.settings.batch_tokens, **update)
        except InvalidRequest as e:
            raise RequestError(422, str(e)) from None

    def submit(self, request: TranslateRequest) -> Future:
        """Check the request's sentences against the model's limit and queue them; the future gets
        their n-best lists."""
        if self.closing:
            raise RequestError(503, "the server is shutting down")
        lines = [line.rstrip("\r").strip() for line in request.src]  # as `tbuild decode` reads its lines
        lengths = [len(ids) + 1 if ids else 0 for ids in self.engine.tokenizer.encode(lines)]
        check_lengths(lengths, self.settings.limits)
        return self.batcher.submit(Job(lines, lengths, self.decode_request(request)))

    def respond(self, request: TranslateRequest, results: list[list[Hypothesis]]) -> TranslateResponse:
        tok = self.engine.tokenizer
        texts = [[Hyp(text=tok.decode(h.tokens), score=h.score) for h in hyps] for hyps in results]
        return TranslateResponse(
            translations=[t[0].text if t else "" for t in texts],
            scores=[t[0].score if t else 0.0 for t in texts] if request.scores else None,
            nbest=texts if request.nbest else None,
        )

    def close(self, timeout: float | None = None) -> None:
        """Refuse new requests, answer the queued ones, stop the worker."""
        self.closing = True
        self.batcher.close(timeout)

    def health(self) -> dict:
        return {"status": "draining" if self.closing else "ok", "pending": self.batcher.pending(),
                **self.batcher.stats.to_json()}

    def info(self) -> dict:
        return service_info(self)


def service_info(service: Service) -> dict:
    """``GET /info``: the model, its engine, its tokenizer and its scores where evaluated."""
    from tbuild.builder.inspect import inspect_model

    run, spec, s = service.run, service.run.spec, service.settings
    scores = {e.split: {"bleu": e.bleu, "bleu_signature": e.bleu_signature, "chrf": e.chrf} for e in run.dir.evals()}
    return {
        "name": spec.name, "params": inspect_model(spec).total,
        "source_lang": spec.data.source_lang, "target_lang": spec.data.target_lang,
        "engine": service.engine.name, "precision": service.engine.precision, "weights": service.engine.weights,
        "tokenizer_sha256": hashlib.sha256(run.tokenizer.read_bytes()).hexdigest(),
        "decode": spec.decode.model_dump(),
        "batching": {"enabled": s.batching, "batch_tokens": s.batch_tokens, "max_wait_ms": round(s.max_wait * 1000),
                     "timeout_s": s.timeout},
        "limits": {"max_lines": s.limits.max_lines, "max_chars": s.limits.max_chars,
                   "max_tokens": s.limits.max_tokens},
        "bleu": scores,
    }


def open_service(run: Run, *, engine: str = "native", quantization: str | None = None, device: str = "auto",
                 checkpoint: Any = None, average: int | None = None, batch_tokens: int | None = None,
                 max_wait_ms: float = 10.0, batching: bool = True, timeout: float = 30.0, max_lines: int = 256,
                 max_chars: int = 2000, after_batch: Any = lambda: None, notify: Any = lambda _: None,
                 compiled: bool = False) -> Service:
    """Load the run's ``engine`` (``load_engine``) and put it behind a batcher."""
    from ..decoding.translator import DEFAULT_MAX_SOURCE
    from ..errors import TbuildError
    from ..export.engines import load_engine

    for name, value in (("--batch-tokens", batch_tokens or 1), ("--max-lines", max_lines), ("--max-chars", max_chars),
                        ("--timeout", timeout)):
        if value <= 0:
            raise TbuildError(f"{name} must be positive, not {value}")
    if max_wait_ms < 0:
        raise TbuildError(f"--max-wait-ms must be 0 or more, not {max_wait_ms}")
    loaded = load_engine(run, engine, quantization=quantization, checkpoint=checkpoint, average=average,
                         device=device, notify=notify, compiled=compiled)
    if compiled:  # compile before the first request, which would otherwise wait for it
        notify("compiling the decoder step on warm-up sentences")
        loaded.translate(["A warm-up sentence.", "Two short ones", "and a third, somewhat longer than the others."],
                         DecodeRequest.of(run.spec.decode))
    limits = Limits(max_lines, max_chars, run.spec.model.max_positions or DEFAULT_MAX_SOURCE)
    settings = Settings(batch_tokens or run.spec.decode.batch_tokens, max_wait_ms / 1000, batching, timeout, limits)
    return Service(loaded, run, settings, after_batch)
