"""tbuild.json beside an exported model: what it was exported from (run, weights, tokenizer) and, for a
fine-tuned run, where that run started (its train.init lineage)."""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

from ..data.download import sha256_of
from ..files import atomic_write
from ..run.directory import Run

PROVENANCE = "tbuild.json"


def write_provenance(run: Run, out: Path, target: str, weights: str) -> Path:
    """Write ``out/tbuild.json`` and return its path."""
    data = {"tbuild": version("tbuild"), "target": target, "name": run.spec.name,
            "run": str(run.dir.path.resolve()), "weights": weights,
            "tokenizer_sha256": sha256_of(run.tokenizer), "lineage": run.dir.lineage()}
    path = out / PROVENANCE
    atomic_write(path, (json.dumps(data, indent=1) + "\n").encode())
    return path
