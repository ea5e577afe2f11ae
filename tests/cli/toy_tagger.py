"""A tiny tagger trained through the CLI on toy files: the run several CLI tests start from."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app

TRAIN = ("cats dogs birds\nthe can rusts\nyou can can\n", "NNS NNS NNS\nDT NN VBZ\nPRP MD MD\n")
TEST = ("the can swims cats\n", "DT NN VBZ NNS\n")


def tagger_spec(train: str, valid: str, test: str | None = None, **settings: object) -> dict:
    """A tiny tagger's spec (1 layer, d_model 16, selected on accuracy) over the word/tag files at ``train``,
    ``valid`` (and ``test``); ``settings`` update its train section."""
    data = {"dataset": {"kind": "tagging", "source": "files"}, "train": train, "valid": valid,
            "tokenizer": {"vocab_size": 30}} | ({"test": test} if test else {})
    return {"model": {"kind": "encoder_only", "d_model": 16, "encoder": {"layers": 1, "heads": 2, "d_ff": 32},
                      "head": {"kind": "token_classification"}},
            "data": data,
            "train": {"max_steps": 3, "validate_every": 2, "threads": 1, "precision": "fp32",
                      "select": {"metric": "accuracy"}, **settings}}


def toy_tagger(root: Path, name: str = "run", *, test: tuple[str, str] = TEST, model: dict | None = None,
               train: dict | None = None) -> tuple[Path, str]:
    """Train a tagger (1 layer, d_model 16, 3 steps; ``model`` and ``train`` update the spec's sections) on
    TRAIN (also its valid split) and ``test`` in ``root``, from ``root/tagger.yaml`` (``tagger-NAME.yaml`` for
    another ``name``): its run directory ``root/name`` and what train said."""
    for split, (words, tags) in (("train", TRAIN), ("valid", TRAIN), ("test", test)):
        (root / f"{split}.words").write_text(words)
        (root / f"{split}.tags").write_text(tags)
    spec = tagger_spec(str(root / "train"), str(root / "valid"), str(root / "test"), log_every=1, **(train or {}))
    spec["model"] |= model or {}
    spec["output_dir"] = str(root / name)
    path = root / ("tagger.yaml" if name == "run" else f"tagger-{name}.yaml")
    path.write_text(yaml.safe_dump(spec))
    result = CliRunner().invoke(app, ["train", str(path)])
    assert result.exit_code == 0, result.output
    return root / name, result.output
