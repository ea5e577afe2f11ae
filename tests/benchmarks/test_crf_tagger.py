"""`python -m benchmarks.crf_tagger` on a toy tagger spec: the grid chosen on validation, test scored once,
known and unknown words split as `tbuild evaluate` splits them, and its refusals (skipped without the crf
extra)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from benchmarks.crf_tagger import shape, word_features
from tests.conftest import REPO

TRAIN = ("cats dogs birds\nthe can rusts\nyou can can\nthe dogs run\n",
         "NNS NNS NNS\nDT NN VBZ\nPRP MD MD\nDT NNS VBP\n")
TEST = ("the can swims cats\n", "DT NN VBZ NNS\n")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchmarks.crf_tagger", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def test_features_of_a_word() -> None:
    assert shape("McDonald's") == "XxXx'x" and shape("1,234.5") == "d,d.d"
    f = word_features(["The", "Dow", "fell", "22.6", "%"], 3)
    assert f["w"] == "22.6" and f["s2"] == ".6" and f["p4"] == "22.6" and f["shape"] == "d.d"
    assert f["w-2"] == "dow" and f["w+1"] == "%" and f["w+2"] == "</s>" and f["digit"] == 0.0
    assert word_features(["Dow"], 0)["w-1"] == "<s>" and word_features(["Dow"], 0)["title"] == 1.0


def test_trains_chooses_on_validation_and_scores_test_once(tmp_path: Path) -> None:
    pytest.importorskip("pycrfsuite", reason="the crf extra (python-crfsuite) is not installed")
    for split, (words, tags) in (("train", TRAIN), ("valid", TRAIN), ("test", TEST)):
        (tmp_path / f"{split}.words").write_text(words)
        (tmp_path / f"{split}.tags").write_text(tags)
    spec = {"model": {"kind": "encoder_only", "head": {"kind": "token_classification"}},
            "data": {"dataset": {"kind": "tagging", "source": "files"}, "train": str(tmp_path / "train"),
                     "valid": str(tmp_path / "valid"), "test": str(tmp_path / "test")}}
    (tmp_path / "tagger.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "crf.json"
    result = run("--spec", str(tmp_path / "tagger.yaml"), "--c1", "0,0.1", "--c2", "0.01", "--iterations", "20",
                 "--sentences", "3", "--json", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["words"] == {"train": 9, "valid": 9, "test": 4}  # --sentences 3: the first three lines
    assert [(g["c1"], g["c2"]) for g in report["grid"]] == [(0.0, 0.01), (0.1, 0.01)]
    best = max(report["grid"], key=lambda g: g["valid"])
    assert (report["chosen"]["c1"], report["valid"]) == (best["c1"], best["valid"])
    known, unknown = report["known"], report["unknown"]  # the, can, cats seen in training; swims not
    assert (known["words"], unknown["words"]) == (3, 1)
    assert 3 * known["accuracy"] + unknown["accuracy"] == pytest.approx(4 * report["test"])
    assert report["baseline"]["test"] == 0.5 and report["train_seconds"] >= 0 and report["cpu_model"]
    assert "test known words" in result.stdout


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    pytest.importorskip("pycrfsuite", reason="the crf extra (python-crfsuite) is not installed")
    result = run("--spec", str(tmp_path / "missing.yaml"))
    assert result.returncode == 2 and result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert run("--c1", "a,b").returncode == 2
