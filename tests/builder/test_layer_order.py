"""model.<stack>.order in the spec: one-line errors naming file, line and field; the architecture hash
of every spec without it unchanged; inspect's rows and the export targets' refusal for other orders."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.builder import SpecError, build_model, load_spec
from tbuild.builder.inspect import inspect_model
from tbuild.cli.app import app
from tbuild.engine.export.targets import describe_targets

from ..conftest import REPO, TINY, tiny_train_spec

HEAD = "model:\n  vocab_size: 40\n  d_model: 16\n"


def error_of(tmp: Path, text: str) -> tuple[Path, str]:
    path = tmp / "s.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    message = str(info.value)
    assert len(message.splitlines()) == 1
    return path, message


def test_unknown_letters_and_empty_orders_are_refused(tmp_path: Path) -> None:
    p, msg = error_of(tmp_path, HEAD + "  encoder:\n    order: axf\n")
    assert msg.startswith(f"{p}:5:5: model.encoder.order: unknown letter 'x' in order 'axf': give a preset "
                          "(standard, macaron, sandwich, parallel) or letters a (self-attention)")
    p, msg = error_of(tmp_path, HEAD + "  decoder:\n    groups:\n      - {repeat: 1}\n      - {repeat: 1, order: "
                      "''}\n")
    assert msg.startswith(f"{p}:7:21: model.decoder.groups.1.order: empty order ''")
    p, msg = error_of(tmp_path, HEAD + "  encoder: {order: macaroon}\n")
    assert "model.encoder.order: unknown letters 'm', 'n', 'o', 'r' in order 'macaroon'" in msg


def test_cross_attention_only_where_the_stack_attends_to_an_encoder(tmp_path: Path) -> None:
    p, msg = error_of(tmp_path, HEAD + "  encoder:\n    layers: 2\n    order: acf\n")
    assert msg.startswith(f"{p}:6:5: model.encoder.order: order 'acf' has cross-attention (c), which only an "
                          "encoder_decoder model's decoder has (it attends to the encoder): the encoder of an "
                          "encoder_decoder model takes a and f only")
    p, msg = error_of(tmp_path, "model:\n  kind: decoder_only\n  decoder:\n    order: acf\n")
    assert msg.startswith(f"{p}:4:5: model.decoder.order: order 'acf' has cross-attention (c)")
    assert "the decoder of a decoder_only model takes a and f only" in msg
    p, msg = error_of(tmp_path, HEAD + "  decoder:\n    order: aaf\n")
    assert msg.startswith(f"{p}:5:5: model.decoder.order: order 'aaf' has no cross-attention (c): the decoder "
                          "layers of an encoder_decoder model attend to the encoder")


def test_a_layer_needs_self_attention_and_parallel_needs_pre_norm(tmp_path: Path) -> None:
    p, msg = error_of(tmp_path, HEAD + "  encoder:\n    groups: [{repeat: 2}, {repeat: 1, order: ff}]\n")
    assert msg.startswith(f"{p}:5:39: model.encoder.groups.1.order: order 'ff' has no self-attention: a layer "
                          "needs at least one a")
    p, msg = error_of(tmp_path, HEAD + "  decoder:\n    order: parallel\n")
    assert msg.startswith(f"{p}:5:5: model.decoder.order: order 'parallel' adds attention and feed-forward of one "
                          "normed input, x + attn(norm(x)) + ffn(norm(x)): it needs model.norm_placement: pre")
    ok = load_spec(TINY, ["model.decoder.order=parallel", "model.norm_placement=pre"]).spec
    assert ok.model.decoder.order == "parallel"


def test_the_default_order_leaves_the_hash_as_it_was(tmp_path: Path) -> None:
    """Specs without ``order`` (every spec before it) keep their architecture hash, so their runs'
    checkpoints still load; ``standard`` said out loud is the same model and the same hash."""
    tiny = load_spec(TINY).spec
    assert tiny.architecture_hash() == "b07e1be27699a8b1"  # before model.<stack>.order existed
    base = load_spec(REPO / "specs" / "base.yaml").spec
    assert base.architecture_hash() == "299b1a691e965ace"
    said = load_spec(TINY, ["model.encoder.order=standard", "model.decoder.order=standard"]).spec
    assert said.architecture_hash() == tiny.architecture_hash()
    macaron = load_spec(TINY, ["model.encoder.order=macaron"]).spec
    assert macaron.architecture_hash() != tiny.architecture_hash()
    groups = ["model.decoder.layers=null", "model.decoder.order=macaron",
              "model.decoder.groups=[{repeat: 1}, {repeat: 1, order: standard}]"]
    mixed = load_spec(TINY, groups).spec  # a group's standard inside a macaron stack is not the default
    all_macaron = load_spec(TINY, groups[:2] + ["model.decoder.groups=[{repeat: 1}, {repeat: 1}]"]).spec
    assert mixed.architecture_hash() != all_macaron.architecture_hash()
    assert [type(layer).__name__ for layer in build_model(mixed).decoder] == ["OrderedDecoderLayer", "DecoderLayer"]
    path = tmp_path / "spec.yaml"  # a run's spec.yaml writes every field out (order: null) and reloads as it was
    path.write_text(yaml.safe_dump(macaron.model_dump(mode="json")))
    assert load_spec(path).spec.architecture_hash() == macaron.architecture_hash()
    path.write_text(yaml.safe_dump(tiny.model_dump(mode="json")))
    assert load_spec(path).spec.architecture_hash() == tiny.architecture_hash()


def test_inspect_shows_the_extra_blocks_and_the_targets_refuse_them(tmp_path: Path) -> None:
    spec = load_spec(TINY, ["model.encoder.order=macaron", "model.decoder.order=macaron"]).spec
    report = inspect_model(spec)
    assert report.total == sum(p.numel() for p in build_model(spec).parameters()) == 11776 + 4 * 1104
    rows = {r.block: r for r in report.rows}
    assert rows["encoder layers 0–1 (×2)"].note == ("order faf (macaron): self-attention 1,088, feed-forward ×2 "
                                                     "2,144, norms 96 per layer")
    assert rows["decoder layers 0–1 (×2)"].note.startswith("order facf (macaron): self-attention 1,088, "
                                                           "feed-forward ×2 2,144, cross-attention 1,088")
    assert inspect_model(load_spec(TINY).spec).rows[3].note == ("self-attention 1,088, feed-forward 1,072, "
                                                                 "norms 64 per layer")
    # acacf: two self- and two cross-attentions per decoder layer; the paper's model has 6 attention blocks
    # (2 encoder layers × a, 2 decoder layers × a, c) of equal FLOPs at n = 64, acacf 4 more
    paper, two = (inspect_model(load_spec(TINY, o).spec).attention_flops
                  for o in ([], ["model.decoder.order=acacf"]))
    assert two == paper + 4 * (paper // 6)
    assert describe_targets(spec)[0] == ("ctranslate2: no (cannot export to ctranslate2: encoder layer group 0 has "
                                         "order faf (macaron); ctranslate2 layers are the paper's (order standard: "
                                         "self-attention, cross-attention, feed-forward))")
    path = tmp_path / "macaron.yaml"
    path.write_text(yaml.safe_dump(copy.deepcopy(TINY) | {"model": TINY["model"] | {
        "encoder": {"layers": 2, "heads": 4, "d_ff": 32, "order": "macaron"}}}))
    result = CliRunner().invoke(app, ["inspect", str(path), "--json"])
    assert result.exit_code == 0, result.output
    notes = [row["note"] for row in json.loads(result.stdout)["rows"]]
    assert "order faf (macaron): self-attention 1,088, feed-forward ×2 2,144, norms 96 per layer" in notes
    assert json.loads(result.stdout)["total"] == 11776 + 2 * 1104  # the encoder's second FFN and its norm


def test_train_and_decode_a_macaron_and_parallel_model_from_the_cli(tiny_corpus: Path, tmp_path: Path) -> None:
    """End to end: a model with macaron encoder layers and parallel decoder layers trains, and beam search
    (the cached incremental decoder, reordered every step) decodes with it."""
    spec = tiny_train_spec(tiny_corpus, tmp_path / "run", max_steps=4, validate_every=4, checkpoint_every=4)
    spec["model"] |= {"norm_placement": "pre", "max_positions": 40}
    spec["model"]["encoder"]["order"], spec["model"]["decoder"]["order"] = "macaron", "parallel"
    spec["decode"] = {"beam": 3, "max_len_a": 1.0, "max_len_b": 5}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    runner = CliRunner()
    trained = runner.invoke(app, ["train", str(tmp_path / "spec.yaml")])
    assert trained.exit_code == 0, trained.output
    decoded = runner.invoke(app, ["decode", str(tmp_path / "run")], input="A man is riding a bike.\nTwo dogs.\n")
    assert decoded.exit_code == 0, decoded.output
    assert len(decoded.stdout.splitlines()) == 2
    saved = load_spec(tmp_path / "run" / "spec.yaml").spec  # the run's resolved spec keeps the orders
    assert (saved.model.encoder.order, saved.model.decoder.order) == ("macaron", "parallel")


def test_a_parallel_language_model_trains_and_generates_from_the_cli(tiny_corpus: Path, tmp_path: Path) -> None:
    """decoder_only with GPT-J-style parallel layers (RoPE, pre-norm): train, then generate with beam 2
    (the cached decoder) and greedily; the same greedy text twice."""
    from tests.cli.test_lm import lm_spec

    spec = lm_spec(tiny_corpus, tmp_path / "run")
    spec["model"]["decoder"]["order"] = "parallel"
    (tmp_path / "lm.yaml").write_text(yaml.safe_dump(spec))
    runner = CliRunner()
    trained = runner.invoke(app, ["train", str(tmp_path / "lm.yaml")])
    assert trained.exit_code == 0, trained.output
    beam = runner.invoke(app, ["generate", str(tmp_path / "run"), "--beam", "2"], input="Eine Frau\n")
    assert beam.exit_code == 0, beam.output
    greedy = [runner.invoke(app, ["generate", str(tmp_path / "run")], input="Ein Mann\n") for _ in range(2)]
    assert greedy[0].exit_code == 0 and greedy[0].stdout.strip() and greedy[0].stdout == greedy[1].stdout
