"""Run directories: the resolved spec, tokenizer and checkpoints of one training run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from tbuild.builder import LoadedSpec, load_spec
from tbuild.builder.schema import Spec

from .checkpoint import CKPT_DIR, atomic_write
from .errors import TbuildError

SPEC_FILE = "spec.yaml"
TOKENIZER_FILE = "spm.model"
BEST_FILE = "best.safetensors"


@dataclass
class Run:
    """A spec resolved against its run directory."""

    spec: Spec
    run_dir: Path
    checkpoint: Path | None = None  # set when the user named a checkpoint file


def resolve_target(path: Path, overrides: list[str] | None = None) -> Run:
    """Accept a spec file, a run directory or a checkpoint file and find the run it belongs to."""
    if path.is_dir():
        if not (path / SPEC_FILE).exists():
            raise TbuildError(f"{path}: not a run directory (no {SPEC_FILE}); train it first with `tbuild train SPEC`")
        loaded = load_spec(path / SPEC_FILE, overrides)
        return Run(loaded.spec, path)
    if path.suffix == ".safetensors":
        run_dir = path.parent.parent if path.parent.name == CKPT_DIR else path.parent
        return Run(resolve_target(run_dir, overrides).spec, run_dir, path)
    if not path.exists():
        raise TbuildError(f"{path}: no such spec, run directory or checkpoint")
    loaded = load_spec(path, overrides)
    if (loaded.run_dir / SPEC_FILE).exists():  # the run's resolved spec is what was trained
        return Run(load_spec(loaded.run_dir / SPEC_FILE, overrides).spec, loaded.run_dir)
    return Run(loaded.spec, loaded.run_dir)


def write_resolved_spec(loaded: LoadedSpec, vocab_size: int) -> Spec:
    """Fix the vocabulary size from the tokenizer and store the resolved spec in the run directory."""
    spec = loaded.spec
    v = spec.model.vocab_size
    if v != "from_tokenizer" and v != vocab_size:
        raise TbuildError(f"model.vocab_size ({v}) differs from the tokenizer's vocabulary ({vocab_size}); "
                          "set model.vocab_size: from_tokenizer")
    data = spec.model_dump(mode="json", exclude={"extends"})
    data["model"]["vocab_size"] = vocab_size
    data["name"] = loaded.name
    resolved = Spec.model_validate(data)
    path = loaded.run_dir / SPEC_FILE
    if path.exists():
        old = load_spec(path).spec
        if old.architecture_hash() != resolved.architecture_hash():
            raise TbuildError(f"{loaded.run_dir} holds a run of a different model; use another output_dir "
                              "(--set output_dir=...) or remove the directory")
    atomic_write(path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode())
    return resolved
