"""model.kind: the graphs a spec declares (components/specs/graph.py), what the builder assembles for
each, and the one-line errors (file:line: field) for what a kind does not have."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from tbuild.builder import SpecError, build_model, load_spec
from tbuild.builder.build import ASSEMBLY
from tbuild.builder.inspect import inspect_model
from tbuild.components.decoder_only import DecoderOnly
from tbuild.components.specs.graph import GRAPHS
from tbuild.components.transformer import EncoderDecoder
from tbuild.components.weights import weight_tree

from ..conftest import REPO, TINY

LM = copy.deepcopy(TINY)
LM["model"].pop("encoder")
LM["model"]["kind"] = "decoder_only"


def write(tmp: Path, text: str) -> Path:
    path = tmp / "s.yaml"
    path.write_text(text)
    return path


def error_of(path: Path, overrides: list[str] | None = None) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(path, overrides)
    return str(info.value)


def test_every_declared_kind_has_an_assembly() -> None:
    assert set(GRAPHS) == set(ASSEMBLY) == {"encoder_decoder", "decoder_only", "encoder_only"}


def test_decoder_only_has_no_encoder_and_no_cross_attention() -> None:
    spec = load_spec(LM).spec
    assert spec.model.encoder is None and list(spec.model.stacks()) == ["decoder"]
    model = build_model(spec)
    assert isinstance(model, DecoderOnly)
    names = [n for n, _ in model.named_parameters()]
    assert not [n for n in names if n.startswith(("encoder", "src_embed")) or "cross_attn" in n]
    assert [s.name for s in weight_tree(model).stacks] == ["decoder"]
    # d=16, V=40, 2 layers: tied table 640; per layer attention 4·(16·16+16), FFN 16·32+32+32·16+16, 2 norms
    assert sum(p.numel() for p in model.parameters()) == 640 + 2 * (1088 + 1072 + 64) == 5088


def test_decoder_only_parameter_count_is_what_inspect_prints() -> None:
    for overrides in ([], ["model.tie_embeddings=none", "model.norm_placement=pre", "model.positional.kind=learned",
                           "model.max_positions=20"]):
        spec = load_spec(LM, overrides).spec
        report = inspect_model(spec)
        assert report.total == sum(p.numel() for p in build_model(spec).parameters())
        blocks = [r.block for r in report.rows]
        assert blocks[0] == "token embedding" and not any("encoder" in b or "source" in b for b in blocks)


def test_an_encoder_decoder_builds_as_before() -> None:
    """model.kind defaults to encoder_decoder: the same model, parameters and architecture hash."""
    spec = load_spec(TINY).spec
    assert spec.model.kind == "encoder_decoder"
    model = build_model(spec)
    assert isinstance(model, EncoderDecoder)
    # tied table 640; encoder layers 1088 + 1072 + 64; decoder layers 2·1088 + 1072 + 96
    assert sum(p.numel() for p in model.parameters()) == 640 + 2 * 2224 + 2 * 3344 == 11776
    assert inspect_model(spec).total == 11776
    assert "kind" not in spec.model.model_dump(exclude={"kind"})  # the hash leaves the default kind out
    said = load_spec(TINY, ["model.kind=encoder_decoder"]).spec
    assert said.architecture_hash() == spec.architecture_hash() and said.model.d_model == 16  # merged, not replaced
    base = load_spec(REPO / "specs" / "base.yaml").spec
    # the base model's count and hash before model.kind existed: its runs' checkpoints still load
    assert inspect_model(base).total == 65_110_016 and base.architecture_hash() == "299b1a691e965ace"


def test_cross_attention_on_decoder_only_is_refused_naming_the_field(tmp_path: Path) -> None:
    p = write(tmp_path, "model:\n  kind: decoder_only\n  decoder:\n    layers: 2\n"
              "    cross_attention: {kind: multihead}\n")
    msg = error_of(p)
    assert msg.startswith(f"{p}:5:5: model.decoder.cross_attention: a decoder_only model has no cross-attention")
    assert len(msg.splitlines()) == 1
    p = write(tmp_path, "model:\n  kind: decoder_only\n  cross_attention: {kind: multihead, kv_heads: 2}\n")
    assert error_of(p).startswith(f"{p}:3:3: model.cross_attention: a decoder_only model has no cross-attention")


def test_an_encoder_on_decoder_only_is_refused_naming_the_field(tmp_path: Path) -> None:
    p = write(tmp_path, "model:\n  kind: decoder_only\n  encoder: {layers: 2}\n")
    assert error_of(p).startswith(f"{p}:3:3: model.encoder: a decoder_only model has no encoder: remove "
                                  "model.encoder")
    p = write(tmp_path, "model:\n  kind: decoder_only\n  src_vocab_size: 300\n")
    assert error_of(p).startswith(f"{p}:3:3: model.src_vocab_size: a decoder_only model has one vocabulary")
    p = write(tmp_path, "model:\n  encoder: null\n")
    assert error_of(p).startswith(f"{p}:2:3: model.encoder: an encoder_decoder model needs its encoder stack")
    p = write(tmp_path, "model:\n  kind: tagger\n")
    assert "model.kind: Input should be 'encoder_decoder', 'decoder_only' or 'encoder_only'" in error_of(p)


def test_a_decoder_only_spec_extending_an_encoder_decoder_names_the_encoder(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(TINY))
    p = write(tmp_path, "extends: base.yaml\nmodel:\n  kind: decoder_only\n")
    assert "model.encoder: a decoder_only model has no encoder" in error_of(p)
    p = write(tmp_path, "extends: base.yaml\nmodel:\n  kind: decoder_only\n  encoder: null\n")
    assert load_spec(p).spec.model.d_model == 16  # the rest of the model section merges


def test_the_data_must_fit_the_kind(tmp_path: Path) -> None:
    p = write(tmp_path, "model: {kind: decoder_only}\ndata:\n  train: corpus/train\n")
    assert error_of(p).startswith(f"{p}:1:9: model.kind: a decoder_only model trains on one side of text")
    p = write(tmp_path, "data:\n  dataset: {kind: multi30k, side: de}\n  train: x\n")
    assert error_of(p).startswith(f"{p}:2:3: data.dataset: data.dataset multi30k with one side of text is a "
                                  "language model's data: set model.kind: decoder_only")
    lm = "model: {kind: decoder_only}\ndata:\n  dataset: text\n"
    p = write(tmp_path, lm + "  train: {source: a, target: b}\n")
    assert error_of(p).startswith(f"{p}:4:3: data.train: a language model's data.train is one text file")
    p = write(tmp_path, lm + "  train: a.txt\n  max_length_ratio: 1.5\n")
    assert error_of(p).startswith(f"{p}:5:3: data.max_length_ratio: data.max_length_ratio compares source")
    p = write(tmp_path, lm + "  train: a.txt\n  valid: b.txt\ntrain:\n  select: {metric: bleu}\n")
    assert "train.select.metric: bleu scores translations; a language model is selected on validation perplexity" \
        in error_of(p)
    assert load_spec(REPO / "specs" / "examples" / "graphs" / "lm-multi30k-de.yaml").spec.data.dataset.side == "de"  # type: ignore[union-attr]


def test_a_resolved_decoder_only_spec_reloads(tmp_path: Path) -> None:
    """A run's spec.yaml writes every field out (model.cross_attention's default, encoder: null)."""
    spec = load_spec(LM).spec
    p = write(tmp_path, yaml.safe_dump(spec.model_dump(mode="json")))
    again = load_spec(p).spec
    assert again == spec and again.architecture_hash() == spec.architecture_hash()


@pytest.mark.parametrize("path", sorted((REPO / "specs" / "examples" / "graphs").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_graph_spec_loads(path: Path) -> None:
    """Each spec of specs/examples/graphs/ validates as shipped (extends, merges and all): a typo in one is a
    failing test, not a user's first error."""
    assert load_spec(path).spec.model.kind in ("encoder_decoder", "decoder_only", "encoder_only")
