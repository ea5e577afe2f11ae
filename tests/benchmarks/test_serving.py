"""`python -m benchmarks.serving` on the tiny run: bounded levels, every answer checked, a table; the engine options
passed to the server and its reference alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="tbuild serve needs the serve extra (pip install 'tbuild[serve]')")


@pytest.mark.slow
def test_the_load_benchmark_checks_every_answer(tiny_run: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.serving import main

    out = tmp_path / "serving.json"
    code = main([str(tiny_run), "--clients", "1,4", "--requests", "8", "--seconds", "30", "--lines", "6",
                 "--max-wait-ms", "50", "--json", str(out)])
    rows = json.loads(out.read_text())
    assert code == 0, rows
    assert [(r["batching"], r["clients"]) for r in rows] == [("on", 1), ("on", 4), ("off", 1), ("off", 4)]
    for r in rows:
        assert r["requests"] == 8 and r["wrong"] == 0 and r["failed"] == 0 and r["sentences_per_s"] > 0
        assert 0 < r["p50_ms"] <= r["p99_ms"]
    assert rows[2]["batches"] == rows[3]["batches"] == 8  # off: one request per batch
    assert rows[1]["batches"] < 8  # on, 4 clients: requests share batches
    assert "| clients | batching |" in capsys.readouterr().out


@pytest.mark.slow
def test_the_server_and_its_reference_decode_with_the_same_options(tiny_run: Path, tmp_path: Path) -> None:
    """``--stopping beam`` (like ``--engine`` and ``--quantization``) starts the server with it and decodes the
    reference with it: every answer still matches."""
    from benchmarks.serving import main, parse, serve_options

    assert serve_options(parse([str(tiny_run), "--stopping", "beam", "--quantization", "int8"])) == [
        "--engine", "native", "--quantization", "int8", "--stopping", "beam"]
    out = tmp_path / "serving.json"
    code = main([str(tiny_run), "--clients", "2", "--requests", "4", "--seconds", "30", "--lines", "4",
                 "--modes", "on", "--stopping", "beam", "--json", str(out)])
    rows = json.loads(out.read_text())
    assert code == 0 and [(r["wrong"], r["failed"], r["requests"]) for r in rows] == [(0, 0, 4)], rows
