"""`python -m benchmarks --only train-real`: the trainer's own steps on a recipe's real batches, fp32 and
precision auto, as target tokens/s."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from benchmarks.__main__ import main
from tests.conftest import tiny_train_spec


def test_train_real_times_the_recipes_batches(tiny_corpus: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture) -> None:
    spec = tmp_path / "slice.yaml"
    spec.write_text(yaml.safe_dump({"name": "slice", **tiny_train_spec(tiny_corpus, tmp_path / "unused")}))
    out = tmp_path / "bench.json"
    main(["--only", "train-real", "--spec", str(spec), "--steps", "2", "--repeats", "1", "--warmup", "0",
          "--threads", "1", "--runs-root", str(tmp_path / "runs"), "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [r["precision"].split(":")[0] for r in rows] == ["fp32", "auto"] and "error" not in rows[0]
    for r in rows:
        assert r["shape"] == "real slice" and r["batch_tokens"] == 800 and r["tokens_per_s"] > 0
        assert r["target_tokens"] > 0 and len(r["rounds"]) == 1
    assert not (tmp_path / "unused").exists()  # the recipe's own run directory is left alone
    assert "real slice" in capsys.readouterr().out
