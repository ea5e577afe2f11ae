"""The FastAPI app over a ``Service``: the one decoding route of the run's task (``POST /translate``,
``/generate``, ``/classify``, ``/summarize``: the endpoint's request class names it, its answer and its
document), ``GET /health``, ``GET /info``. A POST to a route not served (another task's) is a 404 that names
the one served (the document lists only the routes this server has). FastAPI validates the body against
the request model (``api.request_model``: the server's limits are in it, so
the OpenAPI document states them) and the document declares every status a route answers. Every error
is a JSON ``{"error": "..."}`` with its status and the exception's headers (a 405's ``Allow``); a
failure of the server itself is a 500 with no traceback (that goes to the server's log); SIGTERM
(uvicorn's graceful shutdown) lets the requests in flight finish, then the lifespan's end drains the
batcher."""

# no `from __future__ import annotations`: FastAPI reads the endpoint's body type, made in create_app

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from .api import ErrorBody, Health, Info, LinesRequest, RequestError, request_model, validation_error
from .service import Service

log = logging.getLogger("tbuild.serve")

STATUSES = {
    400: "The body is not valid UTF-8, or not valid JSON.",
    413: "A line over the model's limit in tokens.",
    422: "The body is not a JSON object of the request's shape (sent as application/json), the list of "
         "lines is empty or longer than the server's limit, a line is over its characters, or an option is "
         "wrong (max_new_tokens past the model's positions, a classifier's text holding a tab).",
    500: "The server failed (the message names the error's type; the traceback goes to the server's log); "
         "the server keeps serving.",
    503: "The request took more than the server's timeout and was cancelled, or the server is shutting down.",
}


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` of these error statuses: each a JSON ``ErrorBody``."""
    return {status: {"model": ErrorBody, "description": STATUSES[status]} for status in statuses}


def add_error_handlers(app: FastAPI, request_type: type[LinesRequest]) -> None:
    """Every error as ``{"error": "..."}``: the client's (4xx, with the exception's headers; a POST to a route not
    served, another task's say, a 404 naming the one served) and the server's (500, the traceback to the log)."""
    route, served_by = request_type.ROUTE, request_type.SERVED_BY

    @app.exception_handler(RequestError)
    async def _request_error(_: Request, e: RequestError) -> JSONResponse:
        return error(e.status, e.message)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, e: HTTPException) -> JSONResponse:
        if isinstance(e.__cause__, UnicodeDecodeError):  # FastAPI's 400 for a body it could not decode
            return error(400, f"the body is not valid UTF-8 (byte {e.__cause__.start})", e.headers)
        if e.status_code == 404 and request.method == "POST":  # another task's endpoint, say
            return error(404, f"{request.url.path} is not served here: this server serves {served_by} at "
                              f"POST /{route} (one endpoint per model kind; GET /info names it)", e.headers)
        return error(e.status_code, str(e.detail), e.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, e: RequestValidationError) -> JSONResponse:
        request_error = validation_error(e.errors(), e.body, request_type)
        return error(request_error.status, request_error.message)

    @app.exception_handler(Exception)
    async def _failure(_: Request, e: Exception) -> JSONResponse:
        log.error("internal error: %r", e)
        return error(500, f"internal error ({type(e).__name__}); the server keeps serving")


def create_app(service: Service) -> FastAPI:
    """The app; the service's batcher is closed (its queue decoded) when the app shuts down."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        log.info("draining: %d sentences' jobs queued", service.batcher.pending())
        await asyncio.to_thread(service.close)

    app = FastAPI(title="tbuild serve", lifespan=lifespan, version="1")
    add_error_handlers(app, service.task.request)
    add_route(app, service)

    @app.get("/health", response_model=Health, responses=responses(500))
    async def health() -> dict:
        """``ok`` (or ``draining``), the kind and endpoint served, the lines queued and the batches decoded."""
        return service.health()

    @app.get("/info", response_model=Info, response_model_exclude_none=True, responses=responses(500))
    async def info() -> dict:
        """The model: name, kind, endpoint, parameters, languages, engine, tokenizer hash, scores where
        evaluated."""
        return service.info()

    return app


def add_route(app: FastAPI, service: Service) -> None:
    """``POST /<route>`` of the service's endpoint (its request class names the route and the answer): the body
    checked against its model (with the server's limits), its lines queued for the batcher, the answer in their
    order (503 after the server's timeout)."""
    base = service.task.request
    answer = base.RESPONSE
    body_type = request_model(service.settings.limits, base)

    async def decode(body: body_type) -> answer:  # type: ignore[valid-type]
        future = service.submit(body)
        try:
            results = await asyncio.wait_for(asyncio.wrap_future(future), service.settings.timeout)
        except asyncio.TimeoutError:
            future.cancel()
            raise RequestError(503, f"the request took more than {service.settings.timeout:g} s and was "
                                    f"cancelled; try again, or with fewer {base.NOUN}") from None
        return service.respond(body, results)

    decode.__doc__, decode.__name__ = base.SUMMARY, base.ROUTE
    app.post(f"/{base.ROUTE}", response_model=answer, response_model_exclude_none=True,
             responses=responses(400, *(() if base.SPLITS else (413,)), 422, 500, 503))(decode)
