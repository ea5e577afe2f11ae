"""Shared fixtures: tiny specs and models."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data" / "multi30k"

TINY = {
    "model": {
        "vocab_size": 40,
        "d_model": 16,
        "encoder": {"layers": 2, "heads": 4, "d_ff": 32},
        "decoder": {"layers": 2, "heads": 4, "d_ff": 32},
        "dropout": {"residual": 0.0, "embedding": 0.0},
    }
}


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def tiny_model(overrides: list[str] | None = None, spec: dict | None = None):  # noqa: ANN201
    from tbuild.builder import build_model, load_spec

    loaded = load_spec(spec or TINY, overrides or [])
    return build_model(loaded.spec).eval()


def _mirror_lines(name: str, n: int) -> list[str]:
    import gzip

    with gzip.open(SHARED_DATA / name, "rt", encoding="utf-8") as f:
        return [next(f).rstrip("\n") for _ in range(n)]


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 400-pair slice of Multi30k train and a 40-pair validation slice, as plain files."""
    root = tmp_path_factory.mktemp("corpus")
    for split, source, n in (("train", "train", 400), ("val", "val", 40), ("test", "test2016", 20)):
        for lang in ("en", "de"):
            (root / f"{split}.{lang}").write_text("\n".join(_mirror_lines(f"{source}.{lang}.gz", n)) + "\n")
    return root


def tiny_train_spec(corpus: Path, run_dir: Path, **train: object) -> dict:
    """A tiny model trained on ``tiny_corpus`` with a 200-piece tokenizer."""
    return {
        "output_dir": str(run_dir),
        "model": {"d_model": 32, "encoder": {"layers": 1, "heads": 2, "d_ff": 64},
                  "decoder": {"layers": 1, "heads": 2, "d_ff": 64}},
        "data": {"train": str(corpus / "train"), "valid": str(corpus / "val"), "test": str(corpus / "test"),
                 "tokenizer": {"vocab_size": 200}, "max_length": 64},
        "train": {"batch_tokens": 800, "max_steps": 6, "log_every": 1, "validate_every": 3,
                  "checkpoint_every": 3, "checkpoint_minutes": None, "keep_last": 10,
                  "schedule": {"kind": "inverse_sqrt", "lr": 1e-3, "warmup": 4}, **train},
    }


@pytest.fixture(scope="session")
def tiny_run(tiny_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory trained for 30 steps through the CLI (checkpoints at 10, 20, 30; best.safetensors)."""
    import yaml
    from typer.testing import CliRunner

    from tbuild.cli.app import app

    root = tmp_path_factory.mktemp("decode")
    spec = tiny_train_spec(tiny_corpus, root / "run", max_steps=30, validate_every=15, checkpoint_every=10)
    spec["model"]["max_positions"] = 40  # the decoder's source limit in these tests
    spec["decode"] = {"beam": 3, "max_len_a": 1.0, "max_len_b": 5}
    (root / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = CliRunner().invoke(app, ["train", str(root / "spec.yaml")])
    assert result.exit_code == 0, result.output
    return root / "run"
