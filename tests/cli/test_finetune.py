"""Starting a run from a trained model (train.init, issue 23): the load plan, vocabularies matched by piece,
freezing, the optimizer and schedule carried on request, lineage, and one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sentencepiece as spm
import yaml
from safetensors.torch import load_file
from typer.testing import CliRunner

from tbuild.builder.spec import InverseSqrtSchedule
from tbuild.cli.app import app
from tbuild.engine.run.checkpoint import read_checkpoint
from tests.conftest import tiny_train_spec

runner = CliRunner()
WIDE = {"COLUMNS": "300"}


@pytest.fixture(scope="module")
def source(tiny_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny run trained 40 steps (checkpoints at 20 and 40), its own 200-piece tokenizer."""
    root = tmp_path_factory.mktemp("source")
    spec = tiny_train_spec(tiny_corpus, root / "run", max_steps=40, validate_every=100, checkpoint_every=20,
                           log_every=1, schedule={"kind": "inverse_sqrt", "lr": 3e-3, "warmup": 4})
    (root / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = runner.invoke(app, ["train", str(root / "spec.yaml")])
    assert result.exit_code == 0, result.output
    return root / "run"


def _write(tmp_path: Path, corpus: Path, source: Path, init: dict, vocab: int = 200, **train: object) -> Path:
    spec = tiny_train_spec(corpus, tmp_path / "ft", log_every=1, validate_every=100, **train)
    spec["train"]["init"] = {"from": str(source), **init}
    spec["data"]["tokenizer"]["vocab_size"] = vocab
    (tmp_path / "ft.yaml").write_text(yaml.safe_dump(spec))
    return tmp_path / "ft.yaml"


def _losses(run: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for line in (run / "metrics.jsonl").read_text().splitlines()
            if "loss" in (r := json.loads(line))}


def _newest(run: Path) -> dict:
    return load_file(sorted((run / "checkpoints").glob("step_*.safetensors"))[-1])


def test_fine_tuning_continues_from_the_sources_loss(source: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    spec = _write(tmp_path, tiny_corpus, source, {}, max_steps=2)
    result = runner.invoke(app, ["train", str(spec)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert f"train.init: from {source} (best.safetensors, step 40)" in result.output
    assert "encoder.layers.0" in result.output and "loaded" in result.output
    assert "trainable" in result.output and "(0 frozen)" in result.output
    assert "train.init's source's, copied" in result.output  # vocab refuse, no tokenizer named: the source's
    assert (tmp_path / "ft" / "spm.model").read_bytes() == (source / "spm.model").read_bytes()

    scratch, tuned = _losses(source), _losses(tmp_path / "ft")
    assert tuned[1] < scratch[1] - 0.5  # not from scratch: from where the source ended
    assert abs(tuned[1] - scratch[40]) < 0.5
    lineage = json.loads((tmp_path / "ft" / "init.json").read_text())
    assert lineage["from"] == str(source.resolve()) and lineage["step"] == 40 and lineage["schedule_offset"] == 0
    assert len(lineage["tokenizer_sha256"]) == 64 and set(lineage["tensors"].values()) == {"loaded"}

    pytest.importorskip("ctranslate2", reason="the export extra is not installed")
    exported = runner.invoke(app, ["export", str(tmp_path / "ft"), "--check", "none", "-o", str(tmp_path / "ct2")])
    assert exported.exit_code == 0, exported.output
    provenance = json.loads((tmp_path / "ct2" / "tbuild.json").read_text())
    assert provenance["lineage"]["from"] == str(source.resolve()) and provenance["lineage"]["step"] == 40

    again = runner.invoke(app, ["train", str(spec), "--set", "train.max_steps=3"], env=WIDE)
    assert again.exit_code == 0, again.output
    assert f"train.init: started from {source.resolve()}" in again.output and "resumed from" in again.output


def test_remap_keeps_each_shared_pieces_row_and_freezing_keeps_tensors(source: Path, tiny_corpus: Path,
                                                                       tmp_path: Path) -> None:
    spec = _write(tmp_path, tiny_corpus, source, {"vocab": "remap", "freeze": ["embeddings", "encoder"]},
                  vocab=260, max_steps=3)
    result = runner.invoke(app, ["train", str(spec)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "remapped" in result.output and "pieces kept their rows" in result.output

    old_sp, new_sp = (spm.SentencePieceProcessor(model_file=str(r / "spm.model")) for r in (source, tmp_path / "ft"))
    old_ids = {old_sp.id_to_piece(i): i for i in range(old_sp.get_piece_size())}
    src, new = load_file(source / "best.safetensors"), _newest(tmp_path / "ft")
    shared = [(i, old_ids[p]) for i in range(new_sp.get_piece_size()) if (p := new_sp.id_to_piece(i)) in old_ids]
    assert 100 < len(shared) < new_sp.get_piece_size()  # some pieces are shared, some new
    embed = "model.src_embed.tokens.weight"
    for new_id, old_id in shared:  # row by row
        assert new[embed][new_id].equal(src[embed][old_id])
    frozen = [k for k in src if k.startswith("model.encoder.")]
    assert frozen and all(new[k].equal(src[k]) for k in frozen)  # bit-identical after 3 steps
    decoder = [k for k in src if k.startswith("model.decoder.")]
    assert not all(new[k].equal(src[k]) for k in decoder)  # the rest trained

    tensors, meta = read_checkpoint(sorted((tmp_path / "ft" / "checkpoints").glob("step_*"))[-1])
    trained = meta["param_names"]
    assert not any(n.startswith(("encoder.", "src_embed.", "tgt_embed.")) for n in trained)
    slots = {int(k.split(".")[1]) for k in tensors if k.startswith("optim.")}
    assert slots == set(range(len(trained)))  # Adam's state for the trainable tensors alone


def test_extend_keeps_the_sources_pieces_and_appends_new_ones(source: Path, tiny_corpus: Path,
                                                               tmp_path: Path) -> None:
    spec = _write(tmp_path, tiny_corpus, source, {"vocab": "extend", "freeze": ["embeddings"]}, vocab=260,
                  max_steps=2)
    result = runner.invoke(app, ["train", str(spec)], env=WIDE)
    assert result.exit_code == 0, result.output
    old_sp, new_sp = (spm.SentencePieceProcessor(model_file=str(r / "spm.model")) for r in (source, tmp_path / "ft"))
    n_old = old_sp.get_piece_size()
    assert new_sp.get_piece_size() > n_old
    assert [new_sp.id_to_piece(i) for i in range(n_old)] == [old_sp.id_to_piece(i) for i in range(n_old)]
    assert f"{n_old:,} pieces kept" in result.output
    src, new = load_file(source / "best.safetensors"), _newest(tmp_path / "ft")
    embed = "model.src_embed.tokens.weight"
    assert new[embed][:n_old].equal(src[embed]) and new[embed].shape[0] == new_sp.get_piece_size()
    text = "A man rides a bicycle."
    assert new_sp.encode(text, out_type=str)  # the extended model still tokenizes


def test_schedule_and_optimizer_carried_on_request(source: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    schedule = {"kind": "inverse_sqrt", "lr": 3e-3, "warmup": 4}
    spec = _write(tmp_path, tiny_corpus, source, {"reset": [], "from": str(source / "checkpoints" /
                                                                          "step_00000040.safetensors")},
                  max_steps=1, schedule=schedule)
    result = runner.invoke(app, ["train", str(spec)], env=WIDE)
    assert result.exit_code == 0, result.output
    record = next(json.loads(line) for line in (tmp_path / "ft" / "metrics.jsonl").read_text().splitlines())
    assert record["lr"] == pytest.approx(InverseSqrtSchedule(**schedule).rate(41, 32))  # the source's step 40 + 1


def test_inspect_shows_the_load_plan(source: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    spec = _write(tmp_path, tiny_corpus, source, {"freeze": ["decoder.layers.0"], "exclude": ["output.*"]})
    result = runner.invoke(app, ["inspect", str(spec)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert f"train.init: from {source}" in result.output
    assert "decoder.layers.0" in result.output and "frozen" in result.output
    assert not (tmp_path / "ft").exists()  # inspecting trains and writes nothing


@pytest.mark.parametrize(("init", "override", "message"), [
    ({}, ["--set", "model.d_model=48"], "train.init: shapes differ from"),
    ({"freeze": ["encoder.layers.3"]}, [], "train.init.freeze: encoder.layers.3: the encoder has layers 0-0"),
    ({"freeze": ["bogus"]}, [], "train.init.freeze: unknown part 'bogus'; parts: embeddings"),
    ({"from": "no/such/run"}, [], "no/such/run"),
])
def test_refusals_are_one_line(source: Path, tiny_corpus: Path, tmp_path: Path, init: dict, override: list[str],
                               message: str) -> None:
    spec = _write(tmp_path, tiny_corpus, source, init, max_steps=1)
    result = runner.invoke(app, ["train", str(spec), *override], env=WIDE)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    # a new run refused leaves no folder behind (not even its tokenizer, spec.yaml or prepared data, written
    # before the load plan refused): the corrected spec then trains, not refused as a change to that run
    assert not (tmp_path / "ft").exists()
    if override:
        assert runner.invoke(app, ["train", str(spec)], env=WIDE).exit_code == 0


def test_copy_deepens_a_model_from_a_named_layer(source: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    spec = _write(tmp_path, tiny_corpus, source, {"copy": {"decoder.layers.1": "decoder.layers.0"},
                                                  "freeze": ["decoder"]}, max_steps=1)
    result = runner.invoke(app, ["train", str(spec), "--set", "model.decoder.layers=2"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "decoder.layers.1" in result.output and "copied" in result.output
    src, new = load_file(source / "best.safetensors"), _newest(tmp_path / "ft")
    layer0 = [k for k in src if k.startswith("model.decoder.0.")]
    assert layer0 and all(new[k.replace(".decoder.0.", ".decoder.1.")].equal(src[k]) for k in layer0)


@pytest.mark.parametrize("spec", sorted((Path(__file__).parents[2] / "specs" / "finetune").glob("*.yaml")),
                         ids=lambda p: p.name)
def test_shipped_fine_tuning_specs_validate(spec: Path) -> None:
    result = runner.invoke(app, ["validate", str(spec)])
    assert result.exit_code == 0, result.output
    assert "init:" in result.output or "small-de" in spec.name
