"""Shared fixtures: tiny specs and models, and Multi30k (from $TBUILD_DATA_MIRROR, else the user cache)."""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
DOWNLOAD_TIMEOUT = 5.0  # seconds per connection: an offline machine skips the data tests at once

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


@pytest.fixture(autouse=True, scope="session")
def _own_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The precision probe's measurements go to a folder of this session, not the user's cache (subprocesses
    inherit it)."""
    previous = os.environ.get("TBUILD_CACHE_DIR")
    os.environ["TBUILD_CACHE_DIR"] = str(tmp_path_factory.mktemp("tbuild-cache"))
    yield
    if previous is None:
        os.environ.pop("TBUILD_CACHE_DIR", None)
    else:
        os.environ["TBUILD_CACHE_DIR"] = previous


COLUMNS = "200"  # the terminal width every test sees, unless it gives its own (CliRunner's env=)


@pytest.fixture(autouse=True)
def _terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same terminal for every test, whatever runs the suite: COLUMNS for the consoles and subprocesses,
    read by the consoles at each print (rich keeps the COLUMNS exported when a console is made, e.g. by the
    shell that started pytest, and would ignore a test's own)."""
    from tbuild.cli import common

    monkeypatch.setenv("COLUMNS", COLUMNS)
    for console in (common.console, common.err_console):
        monkeypatch.setattr(console, "_width", None)


def tiny_model(overrides: list[str] | None = None, spec: dict | None = None):  # noqa: ANN201
    from tbuild.builder import build_model, load_spec

    loaded = load_spec(spec or TINY, overrides or [])
    return build_model(loaded.spec).eval()


def multi30k_cache() -> Path:
    """Where the tests keep the Multi30k files they download: ``$XDG_CACHE_HOME/tbuild/multi30k``
    (default ``~/.cache/tbuild/multi30k``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tbuild" / "multi30k"


@pytest.fixture(scope="session")
def multi30k(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with Multi30k's nine ``<split>.<lang>.gz`` files, each checked against its pinned sha256,
    put there by the project's own fetcher: copied from ``$TBUILD_DATA_MIRROR`` when it is set (a mirror
    that lacks them fails the tests), else downloaded once into ``multi30k_cache()``. Without either the
    tests that use it are skipped with the reason."""
    from tbuild.engine.data.download import MIRROR_ENV
    from tbuild.engine.data.multi30k import fetch_multi30k
    from tbuild.engine.errors import DataError

    if os.environ.get(MIRROR_ENV):
        dest = tmp_path_factory.mktemp("multi30k")
        try:
            fetch_multi30k(dest, progress=False)
        except DataError as e:
            pytest.fail(f"{MIRROR_ENV} is set but unusable: {e}", pytrace=False)
        return dest
    dest = multi30k_cache()
    try:
        fetch_multi30k(dest, progress=False, timeout=DOWNLOAD_TIMEOUT)
    except DataError as e:
        pytest.skip(f"Multi30k not available: set {MIRROR_ENV} or allow the download ({e})")
    return dest


def multi30k_lines(folder: Path, name: str, n: int) -> list[str]:
    """The first ``n`` lines of the Multi30k file ``name`` (e.g. ``val.en.gz``) in ``folder``."""
    with gzip.open(folder / name, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line, _ in zip(f, range(n), strict=False)]  # fewer if the file is shorter


@pytest.fixture(scope="session")
def val_pairs(multi30k: Path) -> tuple[list[str], list[str]]:
    """The first 600 English and German sentences of Multi30k's validation split (stripped)."""
    en, de = ([line.strip() for line in multi30k_lines(multi30k, f"val.{lang}.gz", 600)] for lang in ("en", "de"))
    return en, de


@pytest.fixture(scope="session")
def tiny_corpus(multi30k: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 400-pair slice of Multi30k train and a 40-pair validation slice, as plain files."""
    root = tmp_path_factory.mktemp("corpus")
    for split, source, n in (("train", "train", 400), ("val", "val", 40), ("test", "test2016", 20)):
        for lang in ("en", "de"):
            (root / f"{split}.{lang}").write_text("\n".join(multi30k_lines(multi30k, f"{source}.{lang}.gz", n)) + "\n")
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
                  "schedule": {"kind": "inverse_sqrt", "lr": 1e-3, "warmup": 4},
                  "precision": "fp32", **train},  # auto would measure, and differ from machine to machine
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


@pytest.fixture(scope="session")
def treebank_sample() -> list:
    """All 3,914 trees of the NLTK treebank sample (train, valid, test) from $TBUILD_DATA_MIRROR."""
    import os

    from tbuild.engine.data.treebank import SAMPLE_FILES, sample_trees

    mirror = os.environ.get("TBUILD_DATA_MIRROR")
    archive = Path(mirror or "") / "treebank-sample" / "treebank.zip"
    if not mirror or not archive.is_file():
        pytest.skip("the NLTK treebank sample is not in $TBUILD_DATA_MIRROR")
    trees = [t for split in ("train", "valid", "test") for t in sample_trees(archive, SAMPLE_FILES[split])]
    assert len(trees) == 3914
    return trees
