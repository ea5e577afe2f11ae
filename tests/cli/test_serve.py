"""`tbuild serve` as a user runs it: a real uvicorn on a free port of 127.0.0.1. Its answers equal
`tbuild decode`'s, concurrent requests share batches, and SIGTERM answers the queued requests before
the process exits."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks.serving import call  # the load benchmark's client: one JSON request, (status, body)
from tbuild.cli.app import app

pytest.importorskip("fastapi", reason="tbuild serve needs the serve extra (pip install 'tbuild[serve]')")

LINES = ["A dog runs in the snow.", "Two men are talking.", "A woman in a red coat.", "Children play outside.",
         "A man rides a bike.", "", "The cat sleeps.", "People walk down the street."]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def server(run: Path, *args: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """`tbuild serve RUN` in a subprocess, once /health answers (killed at the end if still running)."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "tbuild.cli", "serve", str(run), "--port", str(port), *args],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):  # bounded: 60 s
            if process.poll() is not None:
                pytest.fail(f"tbuild serve exited: {process.stdout.read()}")
            try:
                call(f"{url}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail("tbuild serve did not answer /health within 60 s")
        yield url, process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


def decoded(run: Path, lines: list[str]) -> list[str]:
    result = CliRunner().invoke(app, ["decode", str(run)], input="".join(f"{line}\n" for line in lines))
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def test_concurrent_requests_are_batched_and_equal_decode(tiny_run: Path) -> None:
    want = decoded(tiny_run, LINES)
    with server(tiny_run, "--max-wait-ms", "300") as (url, _):
        with ThreadPoolExecutor(len(LINES)) as pool:
            answers = list(pool.map(lambda line: call(f"{url}/translate", {"src": [line]}), LINES))
        assert [status for status, _ in answers] == [200] * len(LINES)
        assert [body["translations"][0] for _, body in answers] == want
        health = call(f"{url}/health")[1]
        assert health["requests"] == len(LINES) and health["batches"] < len(LINES), health
        status, body = call(f"{url}/translate", {"src": []})
        assert status == 422 and "empty" in body["error"]


def test_no_batching_decodes_each_request_alone(tiny_run: Path) -> None:
    with server(tiny_run, "--no-batching") as (url, _):
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda line: call(f"{url}/translate", {"src": [line]}), LINES[:4]))
        assert call(f"{url}/health")[1]["batches"] == 4


def test_sigterm_answers_the_queued_requests_then_exits(tiny_run: Path) -> None:
    want = decoded(tiny_run, LINES[:4])
    with server(tiny_run, "--max-wait-ms", "1500") as (url, process):
        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(call, f"{url}/translate", {"src": [line]}) for line in LINES[:4]]
            time.sleep(0.5)  # the requests wait in the batcher (1.5 s)
            process.send_signal(signal.SIGTERM)
            answers = [f.result(timeout=30) for f in futures]
        assert process.wait(timeout=30) == 0
    assert answers == [(200, {"translations": [line]}) for line in want]


@pytest.mark.skipif(os.environ.get("TBUILD_SERVE_MISSING") is None, reason="only where FastAPI is not installed")
def test_without_fastapi_the_error_names_the_extra() -> None:  # pragma: no cover - a bare install
    result = CliRunner().invoke(app, ["serve", "nope"])
    assert "pip install 'tbuild[serve]'" in result.output


def test_a_language_model_is_served_at_generate(tiny_corpus: Path, tmp_path: Path) -> None:
    """`tbuild serve` of a decoder-only run: /generate answers as `tbuild generate` does, /translate is a 404
    naming /generate, /health says the kind."""
    import yaml

    from tests.cli.test_lm import lm_spec

    (tmp_path / "lm.yaml").write_text(yaml.safe_dump(lm_spec(tiny_corpus, tmp_path / "run")))
    trained = CliRunner().invoke(app, ["train", str(tmp_path / "lm.yaml")])
    assert trained.exit_code == 0, trained.output
    prompts = ["Ein Mann", "Zwei Frauen"]
    result = CliRunner().invoke(app, ["generate", str(tmp_path / "run")], input="".join(f"{p}\n" for p in prompts))
    assert result.exit_code == 0, result.output
    with server(tmp_path / "run") as (url, _):
        assert call(f"{url}/generate", {"prompts": prompts}) == (200, {"outputs": result.stdout.splitlines()})
        status, body = call(f"{url}/translate", {"src": ["a"]})
        assert status == 404 and "serves a language model at POST /generate" in body["error"]
        assert call(f"{url}/health")[1]["kind"] == "decoder_only"
