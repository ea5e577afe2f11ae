"""Spec loading: extends, overrides, and one-line errors naming file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tbuild.builder import SpecError, load_spec


def write(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.write_text(text)
    return path


def error_of(path: Path, overrides: list[str] | None = None) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(path, overrides)
    return str(info.value)


def test_unknown_key_names_line_and_suggests(tmp_path: Path) -> None:
    p = write(tmp_path, "s.yaml", "model:\n  d_model: 64\n  d_modle: 32\n")
    msg = error_of(p)
    assert msg.startswith(f"{p}:3:3: model.d_modle: unknown key 'd_modle' (did you mean 'd_model'?)")


def test_wrong_type(tmp_path: Path) -> None:
    p = write(tmp_path, "s.yaml", "model:\n  encoder:\n    heads: six\n")
    assert error_of(p).startswith(f"{p}:3:5: model.encoder.heads: Input should be a valid integer")


def test_bad_kind_lists_registered_kinds(tmp_path: Path) -> None:
    p = write(tmp_path, "s.yaml", "model:\n  positional: {kind: sinusodial}\n")
    msg = error_of(p)
    assert f"{p}:2:16: model.positional.kind: unknown kind 'sinusodial' (did you mean 'sinusoidal'?)" in msg
    assert "learned" in msg


def test_cross_field_heads_must_divide_d_model(tmp_path: Path) -> None:
    p = write(tmp_path, "s.yaml", "model:\n  d_model: 100\n  encoder:\n    heads: 8\n")
    msg = error_of(p)
    assert msg.startswith(f"{p}:4:5: model.encoder.heads: d_model (100) is not divisible by heads (8)")
    # explicit d_k/d_v make it valid
    write(tmp_path, "s.yaml", "model:\n  d_model: 100\n  encoder: {heads: 8, d_k: 10, d_v: 12}\n"
          "  decoder: {heads: 4}\n")
    assert load_spec(p).spec.model.encoder.d_v == 12


def test_cross_field_three_way_tying_needs_shared_vocab(tmp_path: Path) -> None:
    p = write(tmp_path, "s.yaml", "model:\n  src_vocab_size: 300\n")
    assert "model.tie_embeddings: three_way tying needs a shared vocabulary" in error_of(p)


def test_dropout_range_and_positive_sizes(tmp_path: Path) -> None:
    p = write(tmp_path, "s.yaml", "model:\n  dropout: {residual: 1.0}\n  d_model: 0\n")
    msg = error_of(p)
    assert f"{p}:2:13: model.dropout.residual: Input should be less than 1" in msg
    assert f"{p}:3:3: model.d_model: Input should be greater than or equal to 1" in msg


def test_extends_chain_deep_merge_and_kind_replacement(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "model:\n  d_model: 64\n  encoder: {layers: 3, heads: 4}\n"
          "  attention: {kind: multihead, kv_heads: 2}\n")
    write(tmp_path, "b.yaml", "extends: a.yaml\nmodel:\n  encoder: {layers: 2}\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    c = write(sub, "c.yaml", "extends: ../b.yaml\nmodel:\n  decoder: {heads: 2}\n")
    spec = load_spec(c).spec
    assert (spec.model.d_model, spec.model.encoder.layers, spec.model.encoder.heads) == (64, 2, 4)
    assert spec.model.decoder.heads == 2 and spec.model.attention.kv_heads == 2
    # an error in an inherited value points at the file that set it
    write(tmp_path, "a.yaml", "model:\n  d_model: -64\n  encoder: {layers: 3}\n")
    assert error_of(c).startswith(f"{tmp_path / 'a.yaml'}:2:3: model.d_model:")


def test_extends_cycle_and_missing_parent(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "extends: b.yaml\n")
    b = write(tmp_path, "b.yaml", "extends: a.yaml\n")
    assert "extends cycle" in error_of(b)
    c = write(tmp_path, "c.yaml", "extends: nowhere.yaml\n")
    assert error_of(c).startswith(f"{c}:1:1: extends: file not found")


def test_set_overrides_typed_values(tmp_path: Path) -> None:
    p = write(tmp_path, "s.yaml", "model:\n  d_model: 64\n  encoder: {heads: 4}\n  decoder: {heads: 4}\n")
    spec = load_spec(p, ["model.encoder.layers=2", "train.optimizer.betas=[0.8, 0.9]",
                         "model.positional={kind: learned}", "model.max_positions=100"]).spec
    assert spec.model.encoder.layers == 2 and spec.train.optimizer.betas == (0.8, 0.9)
    assert spec.model.positional.kind == "learned"


def test_bad_set(tmp_path: Path) -> None:
    p = write(tmp_path, "s.yaml", "model: {}\n")
    assert "expected KEY=VALUE" in error_of(p, ["model.d_model"])
    assert error_of(p, ["model.d_model=big"]).startswith(
        "--set model.d_model=big: model.d_model: Input should be a valid integer")
    assert "unknown key 'nope'" in error_of(p, ["model.nope=1"])


def test_json_spec_and_yaml_syntax_error(tmp_path: Path) -> None:
    p = write(tmp_path, "s.json", json.dumps({"model": {"d_model": 64, "encoder": {"heads": 4},
                                                        "decoder": {"heads": 4}}}, indent=1))
    assert load_spec(p).spec.model.d_model == 64
    p = write(tmp_path, "s.json", '{"model": {"d_model": 64,\n "heads": 4}}')
    assert error_of(p).startswith(f"{p}:2:2: model.heads: unknown key 'heads'")
    bad = write(tmp_path, "bad.yaml", "model: [1\n")
    assert "YAML syntax error" in error_of(bad)


def test_duplicate_key_and_missing_file(tmp_path: Path) -> None:
    p = write(tmp_path, "s.yaml", "model:\n  d_model: 64\n  d_model: 32\n")
    assert error_of(p) == f"{p}:3:3: duplicate key model.d_model"
    assert error_of(tmp_path / "nope.yaml") == f"{tmp_path / 'nope.yaml'}: spec file not found"


def test_relative_data_paths_resolve_against_declaring_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    write(tmp_path, "base.yaml", "data:\n  train: corpus/train\n")
    p = write(tmp_path / "sub", "s.yaml", "extends: ../base.yaml\ndata:\n  valid: {source: v.en, target: v.de}\n")
    data = load_spec(p).spec.data
    assert data.train == str(tmp_path / "corpus/train")
    assert data.valid.source == str(tmp_path / "sub/v.en")
