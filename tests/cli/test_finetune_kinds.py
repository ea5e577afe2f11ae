"""train.init across model kinds (issue 35) through the CLI: an encoder-only tagger or classifier starts from
a tiny encoder-decoder's encoder (its source embeddings remapped by piece or taken whole, its layers and
final norm; the head new), a decoder-only language model from its decoder (self-attention and feed-forward
blocks; cross-attention skipped and said so), an encoder-decoder from a language model's decoder; kinds that
share no stack, a plan that loads nothing and shapes that differ are one line naming the spec's line."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import sentencepiece as spm
import torch
import yaml
from safetensors.torch import load_file
from typer.testing import CliRunner

from tbuild.builder import build_model, load_spec
from tbuild.cli.app import app
from tbuild.engine.run.checkpoint import read_checkpoint
from tests.conftest import REPO

runner = CliRunner()
WIDE = {"COLUMNS": "300"}
TINY = {"d_model": 16, "norm_placement": "pre"}  # pre-norm: each stack has a final norm
LAYERS = {"layers": 1, "heads": 2, "d_ff": 32}
WORDS = "the a cats dogs birds can rusts you swims man sees big small red house park they run"
TAGS = ("cats dogs birds\nthe can rusts\nyou can can\n", "NNS NNS NNS\nDT NN VBZ\nPRP MD MD\n")
LANGS = "en\tthe dogs run\nde\tdie Hunde laufen\nen\ta man sees cats\nde\tein Mann sieht Katzen\n"
TRAIN = {"max_steps": 2, "validate_every": 100, "log_every": 1, "threads": 1, "precision": "fp32",
         "checkpoint_every": 2, "checkpoint_minutes": None}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with toy data (parallel, tagged, classified) and a tiny encoder-decoder trained 4 steps in
    ``ed/`` (three-way tied embeddings: its checkpoint holds ``src_embed.tokens.weight`` alone)."""
    root = tmp_path_factory.mktemp("kinds")
    rng = random.Random(0)
    lines = [" ".join(rng.choice(WORDS.split()) for _ in range(rng.randint(3, 8))) for _ in range(120)]
    for split, n in (("train", 120), ("val", 12), ("test", 12)):
        (root / f"{split}.en").write_text("\n".join(lines[:n]) + "\n")
        (root / f"{split}.de").write_text("\n".join(line.upper() for line in lines[:n]) + "\n")
    for split in ("train", "valid", "test"):
        (root / f"{split}.words").write_text(TAGS[0])
        (root / f"{split}.tags").write_text(TAGS[1])
        (root / f"{split}.tsv").write_text(LANGS)
    spec = {"output_dir": str(root / "ed"), "model": {**TINY, "encoder": LAYERS, "decoder": LAYERS},
            "data": {"train": str(root / "train"), "valid": str(root / "val"), "test": str(root / "test"),
                     "tokenizer": {"vocab_size": 60}, "max_length": 64},
            "train": {**TRAIN, "max_steps": 4, "batch_tokens": 400,
                      "schedule": {"kind": "inverse_sqrt", "lr": 3e-3, "warmup": 2}}}
    (root / "ed.yaml").write_text(yaml.safe_dump(spec))
    result = runner.invoke(app, ["train", str(root / "ed.yaml")])
    assert result.exit_code == 0, result.output
    return root


def _spec(root: Path, name: str, kind: str, init: dict, **model: object) -> Path:
    """A tiny spec of ``kind`` on the toy data, starting from ``init`` (train.init), trained 2 steps."""
    data: dict = {"dataset": {"kind": "tagging", "source": "files"}, "train": str(root / "train"),
                  "valid": str(root / "valid"), "test": str(root / "test"), "tokenizer": {"vocab_size": 30}}
    body: dict = {**TINY, "kind": "encoder_only", "encoder": LAYERS, "head": {"kind": "token_classification"}}
    if kind == "classifier":
        body["head"] = {"kind": "sequence_classification"}
        data |= {"dataset": {"kind": "classification", "source": "files"}, "train": str(root / "train.tsv"),
                 "valid": str(root / "valid.tsv"), "test": str(root / "test.tsv")}
    elif kind == "lm":
        body = {**TINY, "kind": "decoder_only", "decoder": LAYERS}
        data = {"dataset": "text", "train": str(root / "train.en"), "valid": str(root / "val.en"),
                "test": str(root / "test.en"), "tokenizer": {"vocab_size": 60}}
    elif kind == "ed":
        body = {**TINY, "encoder": LAYERS, "decoder": LAYERS}
        data = {"train": str(root / "train"), "valid": str(root / "val"), "test": str(root / "test"),
                "tokenizer": {"vocab_size": 60}}
    spec = {"output_dir": str(root / name), "model": body | model, "data": data,
            "train": {**TRAIN, "init": init} | ({"select": {"metric": "accuracy"}} if "head" in body else {})}
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def _checkpoint(run: Path) -> dict:
    return load_file(sorted((run / "checkpoints").glob("step_*.safetensors"))[-1])


def _trained_names(run: Path) -> list[str]:
    return read_checkpoint(sorted((run / "checkpoints").glob("step_*.safetensors"))[-1])[1]["param_names"]


def test_a_tagger_starts_from_an_encoder_decoders_encoder_rows_remapped_by_piece(root: Path) -> None:
    init = {"from": str(root / "ed"), "vocab": "remap", "freeze": ["embeddings", "encoder"]}
    result = runner.invoke(app, ["train", str(_spec(root, "tagger", "tagger", init))], env=WIDE)
    assert result.exit_code == 0, result.output
    out = result.output
    assert f"train.init: from {root / 'ed'} (best.safetensors, step 4; the encoder of an encoder_decoder model)" in out
    assert "not loaded from the source (an encoder_decoder model):" in out
    assert "decoder.layers.0" in out and "all 26 skipped" in out and "pieces kept their rows" in out
    assert "stopped at step 2" in out

    source, tagger = load_file(root / "ed" / "best.safetensors"), _checkpoint(root / "tagger")
    encoder = [k for k in source if k.startswith(("model.encoder.", "model.encoder_norm."))]
    assert encoder and all(tagger[k].equal(source[k]) for k in encoder)  # frozen: as loaded, bit for bit
    old_sp, new_sp = (spm.SentencePieceProcessor(model_file=str(r / "spm.model")) for r in (root / "ed",
                                                                                              root / "tagger"))
    old_ids = {old_sp.id_to_piece(i): i for i in range(old_sp.get_piece_size())}
    shared = [(i, old_ids[p]) for i in range(new_sp.get_piece_size()) if (p := new_sp.id_to_piece(i)) in old_ids]
    assert 5 < len(shared) < new_sp.get_piece_size()  # some pieces shared, some new
    embed = "model.src_embed.tokens.weight"
    assert all(tagger[embed][new].equal(source[embed][old]) for new, old in shared)
    assert not any(k.startswith("model.head.") for k in source)

    lineage = json.loads((root / "tagger" / "init.json").read_text())["tensors"]
    assert lineage["head.weight"] == "new" and lineage["src_embed.tokens.weight"] == "remapped"
    assert {s for n, s in lineage.items() if n.startswith("encoder")} == {"loaded"}
    assert _trained_names(root / "tagger") == ["head.weight", "head.bias"]  # "embeddings" is not the head


@pytest.fixture(scope="module")
def classifier(root: Path) -> tuple[Path, str]:
    """A classifier trained 2 steps from the encoder-decoder (its tokenizer taken): run directory, output."""
    result = runner.invoke(app, ["train", str(_spec(root, "classifier", "classifier", {"from": str(root / "ed")}))],
                           env=WIDE)
    assert result.exit_code == 0, result.output
    return root / "classifier", result.output


@pytest.fixture(scope="module")
def lm(root: Path) -> tuple[Path, str]:
    """A language model trained 2 steps from the encoder-decoder's decoder, frozen: run directory, output."""
    result = runner.invoke(app, ["train", str(_spec(root, "lm", "lm", {"from": str(root / "ed"),
                                                                          "freeze": ["decoder"]}))], env=WIDE)
    assert result.exit_code == 0, result.output
    return root / "lm", result.output


def test_a_classifier_takes_the_sources_tokenizer_and_its_whole_table(classifier: tuple[Path, str]) -> None:
    run, out = classifier
    assert "train.init's source's, copied" in out and "1 loaded" in out and "stopped at step 2" in out
    lineage = json.loads((run / "init.json").read_text())["tensors"]
    assert lineage["src_embed.tokens.weight"] == "loaded" and lineage["head.weight"] == "new"
    assert lineage["encoder_norm.weight"] == "loaded"


def test_a_language_model_starts_from_the_decoder_without_its_cross_attention(root: Path,
                                                                              lm: tuple[Path, str]) -> None:
    run, out = lm
    assert "(best.safetensors, step 4; the decoder of an encoder_decoder model)" in out
    assert "10 of 26 skipped: cross_attn" in out and "all 16 skipped" in out  # the encoder's layer
    source, tuned = load_file(root / "ed" / "best.safetensors"), _checkpoint(run)
    decoder = [k for k in tuned if k.startswith(("model.decoder.", "model.decoder_norm."))]
    assert decoder and all(tuned[k].equal(source[k]) for k in decoder)
    lineage = json.loads((run / "init.json").read_text())["tensors"]
    assert lineage["tgt_embed.tokens.weight"] == "loaded"  # the source's three-way tied table, saved as src_embed's

    back = runner.invoke(app, ["train", str(_spec(root, "ed2", "ed", {"from": str(run)})), "--dry-run"], env=WIDE)
    assert back.exit_code == 0, back.output
    assert "the decoder of a decoder_only model" in back.output and "16 loaded, 10 new" in back.output
    assert not (root / "ed2").exists()  # a dry run writes nothing


def test_the_dry_run_shows_the_plan_and_writes_nothing(root: Path) -> None:
    spec = _spec(root, "dry", "tagger", {"from": str(root / "ed")})
    result = runner.invoke(app, ["train", str(spec), "--dry-run"], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "no run there yet" in result.output and "the encoder of an encoder_decoder model" in result.output
    assert "head" in result.output and "2 new" in result.output and not (root / "dry").exists()


@pytest.mark.parametrize(("kind", "init", "model", "message"), [
    ("lm", {"from": "{root}/classifier"}, {}, "train.init: {root}/classifier is an encoder_only model (encoder) "
     "and this spec's is a decoder_only model (decoder): they share no stack"),
    ("tagger", {"from": "{root}/lm"}, {}, "they share no stack, so none of its tensors has a place here; start "
     "from a run of model kind encoder_decoder or encoder_only"),
    ("tagger", {"from": "{root}/ed", "exclude": ["src_embed.*", "encoder*"]}, {}, "train.init: nothing of "
     "{root}/ed loads into this model"),
    ("tagger", {"from": "{root}/ed"}, {"d_model": 24}, "train.init: shapes differ from {root}/ed's"),
], ids=["lm-from-encoder-only", "encoder-only-from-lm", "nothing-loads", "shapes"])
def test_refusals_are_one_line_naming_the_specs_line(root: Path, classifier: tuple[Path, str], lm: tuple[Path, str],
                                                     kind: str, init: dict, model: dict, message: str,
                                                     request: pytest.FixtureRequest) -> None:
    init = {k: v.format(root=root) if isinstance(v, str) else v for k, v in init.items()}
    name = f"refused-{request.node.callspec.id}"
    spec = _spec(root, name, kind, init, **model)
    line = next(i for i, text in enumerate(spec.read_text().splitlines(), 1) if text.strip().startswith("from:"))
    for args in (["train", str(spec), "--dry-run"], ["inspect", str(spec)], ["train", str(spec)]):
        result = runner.invoke(app, args, env=WIDE)
        assert result.exit_code == 2, result.output
        assert f"{spec}:{line}:" in result.output and message.format(root=root) in result.output
        assert "Traceback" not in result.output
    assert not list((root / name).glob("checkpoints/step_*"))


def test_the_shipped_tagger_from_multi30k_validates_and_its_encoder_is_multi30ks() -> None:
    spec = REPO / "specs" / "examples" / "graphs" / "pos-tagger-from-multi30k.yaml"
    result = runner.invoke(app, ["validate", str(spec)], env=WIDE)
    assert result.exit_code == 0, result.output
    tagger = load_spec(spec, ["model.vocab_size=6000", "model.head.labels=[DT,NN]"]).spec
    assert tagger.model.kind == "encoder_only" and tagger.train.init is not None
    assert tagger.train.init.source == "runs/multi30k" and tagger.data.dataset.kind == "tagging"  # type: ignore[union-attr]
    assert Path(tagger.data.train) == REPO / "data" / "pos-sample" / "train"  # extends: relative to pos-tagger.yaml
    translator = load_spec(REPO / "specs" / "multi30k.yaml", ["model.vocab_size=6000"]).spec
    with torch.device("meta"):
        ours, theirs = (dict(build_model(s).named_parameters()) for s in (tagger, translator))
    body = {n: p.shape for n, p in ours.items() if not n.startswith("head.")}
    assert {n.split(".")[0] for n in body} == {"src_embed", "encoder", "encoder_norm"}
    assert all(n in theirs and theirs[n].shape == shape for n, shape in body.items())  # every one loads
