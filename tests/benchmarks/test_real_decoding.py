"""`python -m benchmarks --only real --run RUN`: a trained run's test lines through every engine as
`tbuild decode` loads and calls them, with startup, first output, speed and BLEU per engine."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from benchmarks.__main__ import main, parse
from benchmarks.real_decoding import RealRun, run_real
from tbuild.engine.decoding.request import DecodeRequest
from tbuild.engine.export.engines import load_engine
from tbuild.engine.run.directory import resolve_run


def test_real_workload_rows_match_what_decode_gives(tiny_run: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    run_dir = tmp_path / "run"  # a copy: the CTranslate2 exports cached here must not reach the shared run
    shutil.copytree(tiny_run, run_dir)
    out = tmp_path / "bench.json"
    main(["--only", "real", "--run", str(run_dir), "--lines", "12", "--repeats", "2", "--warmup", "0",
          "--threads", "1", "--json", str(out)])
    real = json.loads(out.read_text())["real"]
    assert real["sentences"] == 12 and real["split"] == "test" and real["beam"] == 3
    rows = {r["engine"]: r for r in real["rows"]}
    natives = {"native fp32", "native default", "native exact", "native patience", "native stop=beam", "native int8"}
    assert natives <= set(rows)
    assert set(rows) | set(real["skipped"]) == natives | {"CT2 float32", "CT2 int8"}
    assert rows["native fp32"]["precision"] == "fp32"  # forced; the default is the run's decode.precision
    for r in rows.values():
        assert len(r["decode_times"]) == 2
        assert 0 < r["startup_s"] < r["first_output_s"]
        assert r["sentences_per_s"] > 0 and r["tokens_per_s"] > 0 and math.isfinite(r["bleu"])
        assert r["output_tokens"] >= 12  # every line ends with at least EOS
    assert rows["native default"]["native_default_over_engine"] == 1.0
    # the figures are of the outputs `tbuild decode` would write: same engine, same request, same lines
    run = resolve_run(run_dir, [])
    lines = [line.strip() for line in (Path(run.spec.data.test + ".en")).read_text().splitlines()][:12]
    results = load_engine(run, "native", device="cpu").translate(lines, DecodeRequest.of(run.spec.decode))
    assert sum(len(h[0].tokens) + 1 for h in results if h) == rows["native default"]["output_tokens"]
    assert "real workload" in capsys.readouterr().out


def test_only_real_needs_a_run() -> None:
    with pytest.raises(SystemExit):
        parse(["--only", "real"])
    with pytest.raises(SystemExit):
        parse(["--only", "real", "--run", "runs/x", "--engines", "native default,native turbo"])
    assert parse(["--only", "real", "--run", "runs/x", "--engines", "native exact, CT2 int8"]).engines == [
        "native exact", "CT2 int8"]


def test_average_decodes_what_decode_average_gives(tiny_run: Path, tmp_path: Path) -> None:
    """`--average`: the rows decode the run's averaged checkpoints, as `scripts/multi30k.sh` evaluates."""
    run_dir = Path(shutil.copytree(tiny_run, tmp_path / "run"))
    real = run_real(RealRun(run_dir, "test", 6, 0, 1, average=2), ["native fp32"])
    assert real["weights"] == "average"
    run = resolve_run(run_dir, ["decode.precision=fp32"])
    lines = [line.strip() for line in (Path(run.spec.data.test + ".en")).read_text().splitlines()][:6]
    results = load_engine(run, "native", device="cpu", average=2).translate(lines, DecodeRequest.of(run.spec.decode))
    assert sum(len(h[0].tokens) + 1 for h in results) == real["rows"][0]["output_tokens"]
