"""Run an app on uvicorn until SIGTERM or Ctrl-C (uvicorn's graceful shutdown: the socket closes,
requests in flight are answered, then the app's lifespan ends and drains the batcher)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

from fastapi import FastAPI


def run_server(app: FastAPI, host: str, port: int, *, log_level: str = "info") -> None:
    """Serve until stopped; a stop by SIGTERM or SIGINT after the drain is a normal exit (status 0)."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # uvicorn's own re-raises the signal once shut down, so a drained server would exit -15
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    Server(uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False)).run()
