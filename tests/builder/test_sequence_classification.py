"""model.head sequence_classification: its spec's one-line errors (file:line: field) where the head and the
data do not fit, the head's pooling checked by hand (mean over non-padding positions, or the first
position), the built classifier's one score row per input, inspect's head row, and the shipped spec."""

from __future__ import annotations

from pathlib import Path

import torch

from tbuild.builder import build_model, load_spec
from tbuild.builder.inspect import inspect_model
from tbuild.components.heads import SequenceClassification
from tbuild.components.specs.head import SequenceClassificationSpec

from ..conftest import REPO
from .spec_files import error_of, write

CLASSIFIER = ("model:\n  kind: encoder_only\n  d_model: 16\n  encoder: {layers: 2, heads: 2, d_ff: 32}\n"
              "  head: {kind: sequence_classification, labels: [de, en, fr]}\n  vocab_size: 50\n"
              "data:\n  dataset: {kind: classification, source: files}\n  train: t.tsv\n  valid: v.tsv\n")


def test_a_sequence_head_on_another_kind_is_refused(tmp_path: Path) -> None:
    p = write(tmp_path, "model:\n  head: {kind: sequence_classification}\n")
    assert error_of(p).startswith(f"{p}:2:3: model.head: an encoder_decoder model has no head")
    p = write(tmp_path, "model:\n  kind: decoder_only\n  head: {kind: sequence_classification}\n")
    assert error_of(p).startswith(f"{p}:3:3: model.head: a decoder_only model has no head")


def test_the_head_must_label_what_the_data_labels(tmp_path: Path) -> None:
    p = write(tmp_path, CLASSIFIER.replace("sequence_classification", "token_classification"))
    assert error_of(p).startswith(f"{p}:5:3: model.head: a token_classification head labels each word, and "
                                  "data.dataset classification labels each line: set model.head to {kind: "
                                  "sequence_classification}")
    p = write(tmp_path, CLASSIFIER.replace("{kind: classification, source: files}", "{kind: tagging}"))
    assert error_of(p).startswith(f"{p}:5:3: model.head: a sequence_classification head labels each line, and "
                                  "data.dataset tagging labels each word: set model.head to {kind: "
                                  "token_classification}")


def test_classification_data_elsewhere_and_paired_files_are_refused(tmp_path: Path) -> None:
    p = write(tmp_path, "data:\n  dataset: {kind: classification}\n  train: t.tsv\n")
    assert error_of(p).startswith(f"{p}:2:3: data.dataset: data.dataset classification is lines and their labels, "
                                  "a classifier's data: set model.kind: encoder_only (an encoder_decoder model "
                                  "trains on source-target pairs)")
    p = write(tmp_path, CLASSIFIER.replace("  valid: v.tsv\n", "  valid: {source: a, target: b}\n"))
    assert error_of(p).startswith(f"{p}:10:3: data.valid: a classifier's data.valid is one LABEL<TAB>TEXT file")
    p = write(tmp_path, CLASSIFIER.replace("{kind: classification, source: files}", "text"))
    assert error_of(p).startswith(f"{p}:8:3: data.dataset: an encoder_only model trains on words and their tags "
                                  "or lines and their labels")
    p = write(tmp_path, CLASSIFIER.replace("labels: [de, en, fr]", "pooling: max"))
    assert "model.head.pooling: Input should be 'mean' or 'first'" in error_of(p)
    p = write(tmp_path, CLASSIFIER.replace("source: files", "source: web"))
    assert "data.dataset.source: Input should be 'files' or 'multi30k-langid'" in error_of(p)
    p = write(tmp_path, CLASSIFIER + "train:\n  select: {metric: chrf}\n")
    assert "train.select.metric: chrf scores decoded outputs" in error_of(p)


def _head(pooling: str) -> SequenceClassification:
    head = SequenceClassification(SequenceClassificationSpec(labels=["a", "b"], pooling=pooling), d_model=3)
    with torch.no_grad():
        head.weight.copy_(torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]]))
        head.bias.copy_(torch.tensor([0.5, -0.5]))
    return head


def test_pooling_by_hand() -> None:
    states = torch.tensor([[[1.0, 2.0, 3.0], [3.0, 4.0, 5.0], [100.0, 100.0, 100.0]],
                           [[0.0, 1.0, 0.0], [2.0, 1.0, 4.0], [4.0, 1.0, 2.0]]])
    pad = torch.tensor([[False, False, True], [False, False, False]])
    # mean over non-padding positions: row 0 (1,2,3),(3,4,5) -> (2,3,4); row 1 -> (2,1,2)
    mean = _head("mean")(states, pad)
    assert mean.shape == (2, 1, 2)
    assert torch.allclose(mean[:, 0], torch.tensor([[2.0 + 0.5, 3.0 + 4.0 - 0.5], [2.0 + 0.5, 1.0 + 2.0 - 0.5]]))
    first = _head("first")(states, pad)  # the first position: (1,2,3) and (0,1,0)
    assert torch.allclose(first[:, 0], torch.tensor([[1.5, 4.5], [0.5, 0.5]]))


def test_the_classifier_scores_each_input_once_whatever_its_padding(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, CLASSIFIER)).spec
    net = build_model(spec).eval()
    assert isinstance(net.head, SequenceClassification) and net.head.pooling == "mean"
    with torch.no_grad():
        alone = net(torch.tensor([[2, 5, 6, 3]]))
        pad = torch.tensor([[False] * 4 + [True] * 2, [False] * 6])  # the first row's padding, by its length
        padded = net(torch.tensor([[2, 5, 6, 3, 0, 0], [2, 7, 8, 9, 10, 3]]), None, pad)
    assert alone.shape == (1, 1, 3) and padded.shape == (2, 1, 3)
    assert torch.allclose(alone[0], padded[0], atol=1e-5)  # padding changes nothing
    rows = {r.block: r for r in inspect_model(spec).rows}
    assert rows["output head"].kind == "sequence_classification" and rows["output head"].note == "3 labels"


def test_the_shipped_langid_spec_validates() -> None:
    spec = load_spec(REPO / "specs" / "examples" / "graphs" / "langid.yaml").spec
    assert spec.model.kind == "encoder_only" and spec.model.head.kind == "sequence_classification"  # type: ignore[union-attr]
    assert spec.data.dataset.kind == "classification" and spec.data.dataset.source == "multi30k-langid"  # type: ignore[union-attr]
    assert spec.train.select.metric == "accuracy" and spec.train.max_minutes == 2
