"""model.kind encoder_only: its spec's one-line errors (file:line: field), the graph the builder
assembles (the encoder-decoder's source side by name, a head over the final states), and inspect's rows."""

from __future__ import annotations

from pathlib import Path

import torch

from tbuild.builder import build_model, load_spec
from tbuild.builder.inspect import inspect_model
from tbuild.components.encoder_only import EncoderOnly

from ..conftest import REPO
from .spec_files import error_of, write

TAGGER = ("model:\n  kind: encoder_only\n  d_model: 16\n  encoder: {layers: 2, heads: 2, d_ff: 32}\n"
          "  head: {kind: token_classification, labels: [DT, NN, VB]}\n  vocab_size: 50\n"
          "data:\n  dataset: {kind: tagging, source: files}\n  train: t\n  valid: v\n")


def test_an_encoder_only_model_needs_a_head_and_has_no_decoder(tmp_path: Path) -> None:
    p = write(tmp_path, TAGGER.replace("  head: {kind: token_classification, labels: [DT, NN, VB]}\n", ""))
    assert error_of(p).startswith(f"{p}:2:3: model.kind: an encoder_only model needs an output head")
    p = write(tmp_path, TAGGER.replace("  vocab_size: 50\n", "  vocab_size: 50\n  decoder: {layers: 2}\n"))
    assert error_of(p).startswith(f"{p}:7:3: model.decoder: an encoder_only model has no decoder")
    p = write(tmp_path, TAGGER.replace("  vocab_size: 50\n", "  vocab_size: 50\n  cross_attention: {kind: multihead, "
                                       "kv_heads: 2}\n"))
    assert error_of(p).startswith(f"{p}:7:3: model.cross_attention: an encoder_only model has no cross-attention")


def test_a_head_on_another_kind_and_tags_for_another_kind_are_refused(tmp_path: Path) -> None:
    p = write(tmp_path, "model:\n  head: {kind: token_classification}\n")
    assert error_of(p).startswith(f"{p}:2:3: model.head: an encoder_decoder model has no head")
    p = write(tmp_path, "data:\n  dataset: {kind: tagging}\n  train: t\n")
    assert error_of(p).startswith(f"{p}:2:3: data.dataset: data.dataset tagging is words and their tags, a "
                                  "tagger's data: set model.kind: encoder_only")
    p = write(tmp_path, TAGGER.replace("{kind: tagging, source: files}", "text"))
    assert error_of(p).startswith(f"{p}:8:3: data.dataset: an encoder_only model trains on words and their tags")
    p = write(tmp_path, TAGGER + "train:\n  select: {metric: bleu}\n")
    assert ("train.select.metric: bleu scores decoded outputs; a tagger or classifier is selected on accuracy "
            "or ppl") in error_of(p)
    p = write(tmp_path, "data:\n  train: x\n  valid: y\ntrain:\n  select: {metric: accuracy}\n")
    assert "train.select.metric: accuracy scores a tagger's labels" in error_of(p)
    p = write(tmp_path, TAGGER.replace("labels: [DT, NN, VB]", "labels: [DT, DT]"))
    assert "labels must be distinct" in error_of(p)


def test_the_graph_is_the_encoder_decoders_source_side_by_name(tmp_path: Path) -> None:
    tagger = load_spec(write(tmp_path, TAGGER)).spec
    net = build_model(tagger)
    assert isinstance(net, EncoderOnly) and net.head.out_features == 3
    pair = load_spec(write(tmp_path, "model:\n  d_model: 16\n  encoder: {layers: 2, heads: 2, d_ff: 32}\n"
                           "  decoder: {layers: 1, heads: 2, d_ff: 32}\n  vocab_size: 50\n")).spec
    theirs = build_model(pair).state_dict()
    ours = {k: v for k, v in net.state_dict().items() if not k.startswith("head.")}
    assert ours and all(k in theirs and theirs[k].shape == v.shape for k, v in ours.items())
    scores = net.eval()(torch.tensor([[5, 6, 7, 3], [5, 3, 0, 0]]))
    assert scores.shape == (2, 4, 3) and torch.isfinite(scores).all()
    report = inspect_model(tagger)
    rows = {r.block: r for r in report.rows}
    assert rows["output head"].params == 16 * 3 + 3 and rows["output head"].note == "3 labels"
    assert "token embedding" in rows and report.total == sum(p.numel() for p in net.parameters())


def test_the_shipped_tagger_spec_validates() -> None:
    spec = load_spec(REPO / "specs" / "examples" / "graphs" / "pos-tagger.yaml").spec
    assert spec.model.kind == "encoder_only" and spec.model.head.labels == "from_data"  # type: ignore[union-attr]
    assert spec.train.select.metric == "accuracy" and spec.data.dataset.tagged  # type: ignore[union-attr]


def test_head_piece_first_by_default_keeps_the_architecture_hash_and_last_changes_it(tmp_path: Path) -> None:
    path = REPO / "specs" / "examples" / "graphs" / "pos-tagger.yaml"
    first = ["model.encoder.layers=4", "model.dropout.residual=0.2"]  # the recipe before it was tuned
    text = path.read_text().replace(", piece: last}", "}")  # the spec without the field
    assert text != path.read_text()
    (tmp_path / "pos-tagger.yaml").write_text(text.replace("../../../data/", f"{REPO}/data/"))
    spec = load_spec(tmp_path / "pos-tagger.yaml", first).spec
    assert spec.model.head.piece == "first"  # type: ignore[union-attr]
    assert spec.architecture_hash() == "67e6b338635ef4a9"  # its hash before model.head.piece existed
    assert load_spec(path, [*first, "model.head.piece=first"]).spec.architecture_hash() == "67e6b338635ef4a9"
    assert load_spec(path, first).spec.architecture_hash() != "67e6b338635ef4a9"  # last


def test_head_piece_is_refused_on_a_sequence_head_and_outside_first_last(tmp_path: Path) -> None:
    classifier = TAGGER.replace("token_classification", "sequence_classification").replace(
        "{kind: tagging, source: files}", "{kind: classification, source: files}")
    p = write(tmp_path, classifier.replace("labels: [DT, NN, VB]}", "labels: [DT, NN, VB], piece: last}"))
    assert error_of(p).startswith(f"{p}:5:3: model.head: piece (which of a word's pieces holds its label) is a "
                                  "token_classification head's field; a sequence_classification head labels each "
                                  "line as a whole")
    p = write(tmp_path, TAGGER.replace("labels: [DT, NN, VB]}", "labels: [DT, NN, VB], piece: middle}"))
    assert error_of(p).startswith(f"{p}:5:")
    assert "model.head.piece: " in error_of(p) and "'first' or 'last'" in error_of(p)
