"""Every spec in specs/examples/ loads, is small, points at the Multi30k layout and builds a model
that runs; together the examples show every registered variant. A task's own example (``<task>.yaml``, a spec
whose task is that one: summarization.yaml, g2p.yaml) is that task's recipe, on its data set: it loads and
builds."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tbuild.builder import build_model, load_spec
from tbuild.builder.resolved import resolve
from tbuild.builder.spec.tasks import declarations
from tbuild.components import REGISTRIES
from tests.conftest import REPO

TASKS = {p.stem for p in (REPO / "specs" / "examples").glob("*.yaml")
         if p.stem in declarations() and p.stem != "translation"}  # a task's recipe, not a Multi30k variant
EXAMPLES = sorted(p for p in (REPO / "specs" / "examples").glob("*.yaml") if p.stem not in TASKS)
DATA = REPO / "data" / "multi30k"


@pytest.mark.parametrize("task", sorted(TASKS))
def test_a_tasks_example_declares_it_loads_and_builds(task: str) -> None:
    loaded = load_spec(REPO / "specs" / "examples" / f"{task}.yaml", ["model.vocab_size=1000"])  # as fitted
    assert loaded.name == task and loaded.spec.task_name() == task
    model = build_model(loaded.spec).eval()
    with torch.no_grad():
        logits = model(torch.randint(4, 1000, (2, 7)), torch.randint(4, 1000, (2, 5)))
    assert logits.shape == (2, 5, 1000) and torch.isfinite(logits).all()


def test_examples_exist() -> None:
    names = {p.stem for p in EXAMPLES}
    assert {"small", "local", "additive", "gqa", "relative", "rope", "alibi", "rmsnorm-prenorm", "swiglu",
            "heterogeneous"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_loads_builds_and_runs(path: Path) -> None:
    loaded = load_spec(path)
    spec = loaded.spec
    assert loaded.name == path.stem  # run directories do not collide
    m = spec.model
    assert m.d_model <= 64 and m.encoder.layers == 2 and m.decoder.layers == 2
    d = spec.data
    assert d.dataset is not None and d.dataset.kind == "multi30k" and d.tokenizer.vocab_size == 1000
    paths = tuple(Path(p).resolve() for p in (d.train, d.valid, d.test))  # type: ignore[arg-type]
    assert paths == tuple(DATA.resolve() / split for split in ("train", "val", "test2016"))
    t = spec.train
    assert (t.max_steps, t.batch_tokens, t.validate_every, t.log_every, t.checkpoint_every,
            t.checkpoint_minutes) == (20, 2000, 10, 5, 10, None)
    model = build_model(spec).eval()
    src, tgt = torch.randint(4, 1000, (2, 7)), torch.randint(4, 1000, (2, 5))
    src[1, 5:] = 0
    with torch.no_grad():
        logits = model(src, tgt)
    assert logits.shape == (2, 5, 1000) and torch.isfinite(logits).all()


def test_examples_cover_every_registered_variant() -> None:
    used: dict[str, set[str]] = {name: set() for name in REGISTRIES}
    for path in EXAMPLES:
        for component in resolve(load_spec(path).spec.model).components:
            where = component.path
            section = "attention" if "attention" in where[-1] else str(where[-1])
            used[section].add(component.spec.kind)
    for name, registry in REGISTRIES.items():
        # learned positions: specs/paper/E-learned.yaml; next_word (a pointer for parsing, not Multi30k):
        # specs/parsing/ptb-sample.yaml
        # token_classification (a tagger's head, model.head): specs/examples/graphs/pos-tagger.yaml;
        # sequence_classification (a classifier's): specs/examples/graphs/langid.yaml; masked_lm (a masked
        # LM's): specs/examples/graphs/mlm-en.yaml; char_cnn (a tagger's character input):
        # specs/examples/graphs/pos-tagger-chars.yaml; sentence_embedding (a headless encoder's pooling, which
        # nothing trains: `tbuild import hf` writes it, tests/engine/hf/test_import_headless.py)
        missing = set(registry) - used[name] - {"learned", "next_word", "token_classification",
                                                "sequence_classification", "masked_lm", "char_cnn",
                                                "sentence_embedding"}
        assert not missing, f"no example uses {name} kinds {sorted(missing)}"


def test_example_trains_three_steps_through_the_cli(tmp_path: Path, multi30k: Path) -> None:
    """`tbuild train` on an example as a user runs it: copied with the spec it extends, so its
    relative data paths resolve under tmp_path, where Multi30k is fetched from the tests' copy."""
    import json
    import shutil

    from typer.testing import CliRunner

    from tbuild.cli.app import app

    folder = tmp_path / "specs" / "examples"
    folder.mkdir(parents=True)
    for name in ("small.yaml", "relative.yaml"):
        shutil.copy(REPO / "specs" / "examples" / name, folder / name)
    run = tmp_path / "run"
    result = CliRunner().invoke(
        app, ["train", str(folder / "relative.yaml"), "--set", "train.max_steps=3", "--set", f"output_dir={run}"],
        env={"TBUILD_DATA_MIRROR": str(multi30k), "COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert (tmp_path / "data" / "multi30k" / "train.en.gz").exists()
    assert "stopped at step 3: train.max_steps=3 reached" in result.output
    assert (run / "checkpoints" / "step_00000003.safetensors").exists()
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps and steps[-1] == 3


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_trains_and_decodes(path: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    """Each variant trains for two steps and decodes through the CLI (on a slice of Multi30k)."""
    from typer.testing import CliRunner

    from tbuild.cli.app import app

    runner = CliRunner()
    run = tmp_path / "run"
    data = [f"data.train={tiny_corpus / 'train'}", f"data.valid={tiny_corpus / 'val'}",
            f"data.test={tiny_corpus / 'test'}", "data.tokenizer.vocab_size=200", "data.dataset=null"]
    overrides = [arg for s in [*data, "train.max_steps=2", "train.validate_every=2", f"output_dir={run}"]
                 for arg in ("--set", s)]
    result = runner.invoke(app, ["train", str(path), *overrides])
    assert result.exit_code == 0, result.output
    assert "stopped at step 2: train.max_steps=2 reached" in result.output
    result = runner.invoke(app, ["decode", str(run), "--beam", "2", "--set", "decode.max_len_b=4"],
                           input="A dog runs in the park.\n")
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == 1
