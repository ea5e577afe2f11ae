"""Ensembles of taggers (``tbuild evaluate RUN RUN …``, ``tbuild decode RUN RUN …``): each word's label
distributions combined by the translators' rules (decoding/ensemble.py), checked against the members'
softmaxes combined by hand; an ensemble of a run with itself is the run; members that read other labels,
a wrong number of weights and a masked LM ensemble are one line each."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app

runner = CliRunner()

TRAIN = ("cats dogs birds\nthe can rusts\nyou can can\n", "NNS NNS NNS\nDT NN VBZ\nPRP MD MD\n")
TEST = ("the can swims cats\nyou rusts\n", "DT NN VBZ NNS\nPRP VBZ\n")


def _spec(root: Path, seed: int, name: str, tokenizer: dict | None = None) -> Path:
    spec = {"model": {"kind": "encoder_only", "d_model": 16, "encoder": {"layers": 1, "heads": 2, "d_ff": 32},
                      "head": {"kind": "token_classification"}},
            "data": {"dataset": {"kind": "tagging", "source": "files"}, "train": str(root / "train"),
                     "valid": str(root / "train"), "test": str(root / "test"),
                     "tokenizer": tokenizer or {"vocab_size": 30}},
            "train": {"max_steps": 4, "validate_every": 2, "threads": 1, "precision": "fp32", "seed": seed,
                      "select": {"metric": "accuracy"}},
            "output_dir": str(root / name)}
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture(scope="module")
def members(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two tiny taggers trained on the same toy files with other seeds, the second with the first's tokenizer
    (as taggers fine-tuned from one masked LM share it)."""
    root = tmp_path_factory.mktemp("ensemble")
    for split, (words, tags) in (("train", TRAIN), ("test", TEST)):
        (root / f"{split}.words").write_text(words)
        (root / f"{split}.tags").write_text(tags)
    runs = []
    for seed in (1, 2):
        tokenizer = {"model": str(runs[0] / "spm.model")} if runs else None
        result = runner.invoke(app, ["train", str(_spec(root, seed, f"s{seed}", tokenizer))])
        assert result.exit_code == 0, result.output
        runs.append(root / f"s{seed}")
    return runs


def _word_probs(run: Path) -> list[torch.Tensor]:
    """Each test sentence's label probabilities at each word's first piece, the member alone."""
    from tbuild.engine.data.word_labels import word_piece, word_pieces, word_row
    from tbuild.engine.decoding.native import load_native_engine
    from tbuild.engine.run.directory import resolve_run

    r = resolve_run(run)
    t = load_native_engine(r)
    out = []
    for pieces in word_pieces(t.tokenizer, [line.split() for line in TEST[0].splitlines()]):
        src, at = word_row(pieces, word_piece(r.spec), t.tokenizer.special)
        with torch.no_grad():
            out.append(t.model(torch.tensor([src])).float().softmax(-1)[0, at])
    return out


@pytest.mark.parametrize("combine", ["prob", "logprob"])
def test_an_ensemble_tags_by_the_members_distributions_combined(members: list[Path], combine: str) -> None:
    """prob: the words' mean probabilities; logprob: their mean log-probabilities (a geometric mean); the
    best label of each, as decode prints and evaluate scores (its perplexity from the combined distribution)."""
    from tbuild.engine.run.directory import resolve_run

    weights = (0.75, 0.25)
    one, two = (_word_probs(run) for run in members)
    labels = resolve_run(members[0]).spec.model.head.labels  # type: ignore[union-attr]
    mixed = [weights[0] * a + weights[1] * b if combine == "prob" else
             (weights[0] * a.log() + weights[1] * b.log()).softmax(-1) for a, b in zip(one, two, strict=True)]
    expected = [" ".join(labels[int(i)] for i in p.argmax(-1)) for p in mixed]
    options = ["--combine", combine, "--weights", "3,1"]
    decoded = runner.invoke(app, ["decode", *map(str, members), *options], input=TEST[0])
    assert decoded.exit_code == 0, decoded.output
    assert decoded.stdout.splitlines() == expected
    result = runner.invoke(app, ["evaluate", *map(str, members), "--split", "test", *options])
    assert result.exit_code == 0, result.output
    assert "ensemble of 2 models" in result.output
    record = json.loads((members[0] / "eval_test.json").read_text())
    gold = [tags.split() for tags in TEST[1].splitlines()]
    right = sum(labels[int(i)] == g for p, tags in zip(mixed, gold, strict=True)
                for i, g in zip(p.argmax(-1), tags, strict=True))
    assert record["accuracy"] == pytest.approx(right / 6) and record["tokens"] == 6
    nll = -sum(math.log(float(p[w, labels.index(g)])) for p, tags in zip(mixed, gold, strict=True)
               for w, g in enumerate(tags)) / 6
    assert record["nll"] == pytest.approx(nll, rel=1e-4)


def test_an_ensemble_of_a_run_with_itself_is_the_run(members: list[Path]) -> None:
    alone = runner.invoke(app, ["evaluate", str(members[1]), "--split", "test"])
    assert alone.exit_code == 0, alone.output
    single = json.loads((members[1] / "eval_test.json").read_text())
    for combine in ("prob", "logprob"):
        twice = runner.invoke(app, ["evaluate", str(members[1]), str(members[1]), "--split", "test",
                                    "--combine", combine])
        assert twice.exit_code == 0, twice.output
        record = json.loads((members[1] / "eval_test.json").read_text())
        assert record["accuracy"] == single["accuracy"]
        assert record["nll"] == pytest.approx(single["nll"], rel=1e-5)


def test_members_that_read_other_labels_or_wrong_weights_are_one_line(members: list[Path], tmp_path: Path) -> None:
    spec = yaml.safe_load((members[0].parent / "s2.yaml").read_text())  # the first run's tokenizer
    spec["model"]["head"]["piece"] = "last"
    spec["output_dir"] = str(tmp_path / "last")
    (tmp_path / "last.yaml").write_text(yaml.safe_dump(spec))
    assert runner.invoke(app, ["train", str(tmp_path / "last.yaml")]).exit_code == 0
    refused = runner.invoke(app, ["decode", str(members[0]), str(tmp_path / "last")], input=TEST[0])
    assert refused.exit_code == 2, refused.output
    assert f"ensemble: {tmp_path / 'last'} reads other labels than {members[0]}" in refused.output
    assert "Traceback" not in refused.output
    weights = runner.invoke(app, ["evaluate", *map(str, members), "--weights", "1,2,3"])
    assert weights.exit_code == 2 and "--weights: 3 weights for 2 models" in weights.output, weights.output
    alone = runner.invoke(app, ["evaluate", str(members[0]), "--weights", "1"])
    assert alone.exit_code == 2 and "--weights needs several runs" in alone.output, alone.output


def test_another_engine_or_int8_is_one_line(members: list[Path]) -> None:
    for option in (["--engine", "ctranslate2"], ["--quantization", "int8"]):
        result = runner.invoke(app, ["decode", str(members[0]), *option], input=TEST[0])
        assert result.exit_code == 2, result.output
        assert "a tagger runs on the native engine in float32 (no --engine or --quantization)" in result.output
