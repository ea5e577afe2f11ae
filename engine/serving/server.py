"""Run an app on uvicorn until SIGTERM or Ctrl-C (uvicorn's graceful shutdown: the socket closes,
requests in flight are answered, then the app's lifespan ends and drains the batcher)."""

from __future__ import annotations

from fastapi import FastAPI


def run_server(app: FastAPI, host: str, port: int, *, log_level: str = "info") -> None:
    import uvicorn

    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False)).run()
