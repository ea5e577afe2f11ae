"""`tbuild serve`: a run behind HTTP at its kind's endpoint, with lines of concurrent requests decoded together."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import console, guarded, notify
from .options import SET_OPTION, TARGET, Loading, Search, decode_runs, grouped


@guarded
@grouped
def serve(
    target: Path = TARGET,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0: every interface)."),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="Port to listen on."),
    batch_tokens: int | None = typer.Option(
        None, "--batch-tokens", help="Batch budget in source tokens, padding included (default: decode.batch_tokens)."),
    max_wait_ms: float = typer.Option(
        10.0, "--max-wait-ms", help="How long a batch waits for more requests after its first (milliseconds; "
        "not after a batch that decoded a request alone)."),
    batching: bool = typer.Option(
        True, "--batching/--no-batching", help="Decode concurrent requests together (off: one request at a time)."),
    timeout: float = typer.Option(30.0, "--timeout", help="Seconds before a request is cancelled with 503."),
    max_lines: int = typer.Option(256, "--max-lines", help="Most sentences in one request (413 above)."),
    max_chars: int = typer.Option(2000, "--max-chars", help="Most characters in one sentence (413 above)."),
    search: Search = Search(),
    loading: Loading = Loading(),
    set_: list[str] = SET_OPTION,
) -> None:
    """Serve a trained run over HTTP at its kind's endpoint: a translator `POST /translate` `{"src": [...]}`,
    a language model `POST /generate` `{"prompts": [...]}`, a tagger or classifier `POST /classify`
    `{"texts": [...]}`; `GET /health`, `GET /info` (OpenAPI docs at /docs). Stops on SIGTERM or Ctrl-C after
    answering the requests queued."""
    from tbuild.engine.device.process import configure_process
    from tbuild.engine.extras import require

    for package in ("fastapi", "uvicorn"):  # before the run is loaded
        require(package, "tbuild[serve]", "tbuild serve")
    from tbuild.engine.serving.app import create_app
    from tbuild.engine.serving.server import run_server
    from tbuild.engine.tasks.service import open_service

    [run] = decode_runs([target], set_, beam=search.beam, alpha=search.alpha, stopping=search.stopping,
                        patience=search.patience, precision=loading.precision)
    process = configure_process()
    service = open_service(run, engine=loading.engine, quantization=loading.quantization, device=loading.device,
                           checkpoint=loading.checkpoint, average=loading.average, batch_tokens=batch_tokens,
                           max_wait_ms=max_wait_ms, batching=batching, timeout=timeout, max_lines=max_lines,
                           max_chars=max_chars, after_batch=process.after_batch, notify=notify,
                           compiled=loading.compile_)
    s = service.settings
    console.print(f"serving {run.spec.name} ({run.spec.model.called}, {service.engine.name}, "
                  f"{service.engine.precision}) at POST http://{host}:{port}/{s.endpoint}; batching "
                  f"{'on' if s.batching else 'off'} ({s.batch_tokens} tokens, {max_wait_ms:g} ms)", highlight=False)
    run_server(create_app(service), host, port)
