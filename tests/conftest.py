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
