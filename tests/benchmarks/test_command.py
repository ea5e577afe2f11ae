"""`python -m benchmarks --quick`: the whole command on tiny sizes, its JSON, and its refusals."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.__main__ import parse
from benchmarks.report import line as report_line
from tests.conftest import REPO


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300)


def test_quick_run_writes_finite_positive_figures(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    # one thread and no HF peer keep it short; HF rows are the same code path as torch's
    result = run("--quick", "--threads", "1", "--peers", "torch,ct2,int8", "--json", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["hardware"]["cpu_model"] and report["hardware"]["threads"] == 1
    assert set(report["peaks"]["cpu"]) == {"fp32", "bf16"} and all(v > 0 for v in report["peaks"]["cpu"].values())
    rows = report["rows"]
    train = [r for r in rows if r["part"] == "train" and "skipped" not in r]
    decode = [r for r in rows if r["part"] == "decode" and "skipped" not in r]
    assert {r["impl"] for r in train} == {"tbuild", "torch"}
    assert {(r["impl"], r["search"]) for r in decode} >= {("tbuild", "beam 4"), ("tbuild", "greedy"),
                                                          ("tbuild int8", "beam 4"), ("tbuild int8", "greedy")}
    assert all(set(r["ratios"]) == {"ct2-float32", "ct2-int8"} for r in decode if r["impl"] == "tbuild int8")
    for r in train + decode:
        assert "error" not in r, r["error"]
        assert r["tokens_per_s"] > 0 and math.isfinite(r["tokens_per_s"])
    for r in train:
        assert r["mfu"] > 0 and math.isfinite(r["mfu"]) and r["peak_memory_mib"] > 0
        assert r["rounds"] == report["settings"]["repeats"] == 2
    for r in decode:
        assert r["output_tokens"] == r["sentences"] * r["out_len"], r  # equal work
    ours = [r for r in train + decode if r["impl"] == "tbuild"]
    ratios = [v for r in ours for v in r["ratios"].values()]
    assert ratios and all(math.isfinite(v) and v > 0 for v in ratios)
    assert all("torch" in r["ratios"] for r in ours if r["part"] == "train")
    for r in rows:  # CPU bf16 rows are timed unless the precision probe finds bf16 emulated
        if r["part"] == "train" and r["device"] == "cpu" and r["precision"] == "bf16":
            assert ("skipped" in r) == (r["bf16_matmul_ratio"] < 0.25), r
    if report["hardware"]["gpu"] is None:
        assert report["gpu_skipped"].startswith("no GPU: skipped")
        assert "no GPU: skipped" in result.stdout
    assert "tbuild ×" in result.stdout
    finished = result.stderr.splitlines()  # each row as it finished, so a run cut short keeps its figures
    for r in rows:
        assert report_line(r) in finished
    assert not (tmp_path / "bench.json.partial").exists()


@pytest.mark.parametrize("args, message", [
    (["--shapes", "huge"], "--shapes 'huge': choose from tiny, base, big"),
    (["--peers", "onnx"], "--peers 'onnx': choose from torch, hf, ct2, compiled, bf16, int8"),
])
def test_bad_choices_are_one_line(args: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as stop:
        parse(args)
    assert str(stop.value) == f"python -m benchmarks: {message}"
