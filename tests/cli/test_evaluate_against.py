"""`tbuild evaluate RUN --against RUN2` end to end on tiny runs: both evaluated, every metric compared by paired
bootstrap with the figures sacreBLEU's own test gives on the outputs they kept; the comparison written into the
first one's record; a tagger compared by accuracy; what cannot be compared refused in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest
from typer.testing import CliRunner

from tbuild.cli.app import app
from tests.cli.toy_tagger import toy_tagger

runner = CliRunner()


@pytest.fixture(scope="module")
def two_runs(tiny_run: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The tiny run, and a copy of it whose 10-step checkpoint is the other system (its own folder)."""
    other = tmp_path_factory.mktemp("against") / "run"
    shutil.copytree(tiny_run, other)
    return tiny_run, other / "checkpoints" / "step_00000010.safetensors"


def test_two_translators_compared_as_sacrebleu_compares_them(two_runs: tuple[Path, Path], tiny_corpus: Path) -> None:
    mine, theirs = two_runs
    result = runner.invoke(app, ["evaluate", str(mine), "--split", "test", "--against", str(theirs),
                                 "--bootstrap", "200", "--show", "0"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert f"against {theirs} on test (20 sentences, paired bootstrap)" in result.output
    assert "95% interval" in result.output and "*: p < 0.05, significant" in result.output
    record = json.loads((mine / "eval_test.json").read_text())
    comparison = record["comparison"]
    assert comparison["against"] == str(theirs) and comparison["samples"] == 200 and comparison["sentences"] == 20
    assert list(comparison["metrics"]) == ["BLEU", "BLEU (lowercased)", "chrF"]
    hyps = (mine / "eval_test.out").read_text().splitlines()
    other = (theirs.parent.parent / "eval_test.out").read_text().splitlines()
    refs = (tiny_corpus / "test.de").read_text().splitlines()
    assert len(hyps) == len(other) == 20 and hyps != other
    assert BLEU().corpus_score(hyps, [refs]).score == record["bleu"]  # the outputs kept are the ones scored
    for name, metric in (("BLEU", BLEU()), ("BLEU (lowercased)", BLEU(lowercase=True)), ("chrF", CHRF())):
        _, scores = PairedTest([("theirs", other), ("mine", hyps)], {name: metric}, [refs], test_type="bs",
                               n_samples=200)()
        base, system = next(v for k, v in scores.items() if k != "System")
        found = comparison["metrics"][name]
        assert (found["score"], found["p_value"], found["mean"], found["ci"]) == (
            system.score, system.p_value, system.mean, system.ci)
        assert (found["against_score"], found["against_mean"], found["against_ci"]) == (base.score, base.mean, base.ci)
        assert found["difference"] == pytest.approx(system.score - base.score)
        assert found["difference_lower"] <= found["difference_mean"] <= found["difference_upper"]


def test_an_ensemble_against_one_of_its_members(two_runs: tuple[Path, Path]) -> None:
    mine, theirs = two_runs
    result = runner.invoke(app, ["evaluate", str(mine), str(theirs), "--split", "test", "--against", str(mine),
                                 "--bootstrap", "50", "--show", "0"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert f"{mine} + {theirs} against {mine} on test" in result.output
    record = json.loads((mine / "eval_test.json").read_text())  # the ensemble's record, with the comparison
    assert record["comparison"]["against"] == str(mine) and record["comparison"]["samples"] == 50


def test_bad_comparisons_are_one_line(two_runs: tuple[Path, Path], tmp_path: Path) -> None:
    mine, theirs = two_runs
    zero = runner.invoke(app, ["evaluate", str(mine), "--against", str(theirs), "--bootstrap", "0"])
    assert zero.exit_code == 2 and "--bootstrap 0: give a number of resamples of at least 1" in zero.output
    lm = tmp_path / "lm.yaml"
    lm.write_text(f"model: {{kind: decoder_only, d_model: 16, decoder: {{layers: 1, heads: 2, d_ff: 32}}}}\n"
                  f"data: {{dataset: text, train: {tmp_path / 'x'}, valid: {tmp_path / 'x'}}}\n"
                  f"output_dir: {tmp_path / 'lm'}\n")
    other = runner.invoke(app, ["evaluate", str(mine), "--against", str(lm)])
    assert other.exit_code == 2
    assert f"--against: {lm} is a language model and {mine} a translator" in other.output


TEST = ("the can swims cats\nyou can rust\nthe dogs can\n", "DT NN VBZ NNS\nPRP MD VBZ\nDT NNS MD\n")


def _tagger(root: Path, seed: int) -> Path:
    train = {"max_steps": 4, "seed": seed, "schedule": {"kind": "inverse_sqrt", "lr": 3e-3, "warmup": 1}}
    return toy_tagger(root, f"run{seed}", test=TEST, train=train)[0]


def test_two_taggers_compared_by_accuracy(tmp_path: Path) -> None:
    from tbuild.engine.significance import accuracy_measure, paired_bootstrap

    first, second = _tagger(tmp_path, 1), _tagger(tmp_path, 2)
    result = runner.invoke(app, ["evaluate", str(first), "--split", "test", "--against", str(second)],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    record = json.loads((first / "eval_test.json").read_text())
    found = record["comparison"]["metrics"]["accuracy"]
    assert found["score"] == pytest.approx(100 * record["accuracy"]) and record["comparison"]["samples"] == 1000
    ours, theirs = ((run / "eval_test.out").read_text().splitlines() for run in (first, second))
    measure = accuracy_measure([line.split() for line in TEST[1].splitlines()])
    again = paired_bootstrap(measure, [measure.statistics(ours)], [measure.statistics(theirs)])
    assert found == again.to_json()
