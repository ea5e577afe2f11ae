"""A tiny tagger trained through the CLI on toy files: the run several CLI tests start from."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app

TRAIN = ("cats dogs birds\nthe can rusts\nyou can can\n", "NNS NNS NNS\nDT NN VBZ\nPRP MD MD\n")
TEST = ("the can swims cats\n", "DT NN VBZ NNS\n")


def toy_tagger(root: Path, name: str = "run", *, test: tuple[str, str] = TEST, model: dict | None = None,
               train: dict | None = None) -> tuple[Path, str]:
    """Train a tagger (1 layer, d_model 16, 3 steps; ``model`` and ``train`` update the spec's sections) on
    TRAIN (also its valid split) and ``test`` in ``root``, from ``root/tagger.yaml`` (``tagger-NAME.yaml`` for
    another ``name``): its run directory ``root/name`` and what train said."""
    for split, (words, tags) in (("train", TRAIN), ("valid", TRAIN), ("test", test)):
        (root / f"{split}.words").write_text(words)
        (root / f"{split}.tags").write_text(tags)
    spec = {"model": {"kind": "encoder_only", "d_model": 16, "encoder": {"layers": 1, "heads": 2, "d_ff": 32},
                      "head": {"kind": "token_classification"}, **(model or {})},
            "data": {"dataset": {"kind": "tagging", "source": "files"}, "train": str(root / "train"),
                     "valid": str(root / "valid"), "test": str(root / "test"), "tokenizer": {"vocab_size": 30}},
            "train": {"max_steps": 3, "validate_every": 2, "log_every": 1, "threads": 1, "precision": "fp32",
                      "select": {"metric": "accuracy"}, **(train or {})},
            "output_dir": str(root / name)}
    path = root / ("tagger.yaml" if name == "run" else f"tagger-{name}.yaml")
    path.write_text(yaml.safe_dump(spec))
    result = CliRunner().invoke(app, ["train", str(path)])
    assert result.exit_code == 0, result.output
    return root / name, result.output
