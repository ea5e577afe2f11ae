"""The FastAPI app over a ``Service``: ``POST /translate``, ``GET /health``, ``GET /info``. Every error
is a JSON ``{"error": "..."}`` with its status; a failure of the server itself is a 500 with no
traceback (that goes to the server's log); SIGTERM (uvicorn's graceful shutdown) lets the requests
in flight finish, then the lifespan's end drains the batcher."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from .api import RequestError, TranslateRequest, TranslateResponse, parse_request
from .service import Service

log = logging.getLogger("tbuild.serve")
_BODY = {"content": {"application/json": {"schema": TranslateRequest.model_json_schema()}}, "required": True}


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def create_app(service: Service) -> FastAPI:
    """The app; the service's batcher is closed (its queue decoded) when the app shuts down."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        log.info("draining: %d sentences' jobs queued", service.batcher.pending())
        await asyncio.to_thread(service.close)

    app = FastAPI(title="tbuild serve", lifespan=lifespan, version="1")

    @app.exception_handler(RequestError)
    async def _request_error(_: Request, e: RequestError) -> JSONResponse:
        return error(e.status, e.message)

    @app.exception_handler(HTTPException)
    async def _http_error(_: Request, e: HTTPException) -> JSONResponse:
        return error(e.status_code, str(e.detail))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, e: RequestValidationError) -> JSONResponse:
        first = e.errors()[0]
        return error(422, f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}")

    @app.exception_handler(Exception)
    async def _failure(_: Request, e: Exception) -> JSONResponse:
        log.error("internal error: %r", e)
        return error(500, f"internal error ({type(e).__name__}); the server keeps serving")

    @app.post("/translate", response_model=TranslateResponse, response_model_exclude_none=True,
              openapi_extra={"requestBody": _BODY})
    async def translate(request: Request) -> TranslateResponse:
        """Translate ``src`` (in order), with the run's decoding options or the request's."""
        body = parse_request(await request.body(), service.settings.limits)
        future = service.submit(body)
        try:
            results = await asyncio.wait_for(asyncio.wrap_future(future), service.settings.timeout)
        except asyncio.TimeoutError:
            future.cancel()
            raise RequestError(503, f"the request took more than {service.settings.timeout:g} s and was "
                                    "cancelled; try again, or with fewer sentences") from None
        return service.respond(body, results)

    @app.get("/health")
    async def health() -> dict:
        """``ok`` (or ``draining``), the sentences queued and the batches decoded so far."""
        return service.health()

    @app.get("/info")
    async def info() -> dict:
        """The model: name, parameters, languages, engine, tokenizer hash, BLEU where evaluated."""
        return service.info()

    return app
