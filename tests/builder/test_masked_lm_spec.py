"""model.head masked_lm: the head's shape and tying, the spec's one-line refusals (the head on another kind,
with labelled data; data.masking without it or with shares over 1), and the shipped pretraining and
fine-tuning examples, whose encoders match tensor by tensor."""

from __future__ import annotations

from pathlib import Path

import torch

from tbuild.builder import build_model, load_spec
from tbuild.builder.inspect import inspect_model

from ..conftest import REPO
from .spec_files import error_of, write

MLM = ("model:\n  kind: encoder_only\n  d_model: 16\n  encoder: {layers: 2, heads: 2, d_ff: 32}\n"
       "  head: {kind: masked_lm}\n  vocab_size: 50\n"
       "data:\n  dataset: text\n  train: t.txt\n  valid: v.txt\n")
GRAPHS = REPO / "specs" / "examples" / "graphs"


def test_the_head_scores_every_piece_at_every_position_tied_to_the_token_table(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, MLM)).spec
    net = build_model(spec).eval()
    assert net.head.weight is net.src_embed.tokens.weight and net.head.bias.shape == (50,)
    src = torch.randint(5, 50, (2, 7))
    with torch.no_grad():
        assert net(src).shape == (2, 7, 50)
    rows = {r.block: r for r in inspect_model(spec, net).rows}
    assert rows["output head"].params == 50 and rows["output head"].note == "50 pieces, tied to the token embedding"


def test_untied_with_tie_embeddings_none(tmp_path: Path) -> None:
    text = MLM.replace("  vocab_size: 50\n", "  vocab_size: 50\n  tie_embeddings: none\n")
    spec = load_spec(write(tmp_path, text)).spec
    net = build_model(spec)
    assert net.head.weight is not net.src_embed.tokens.weight and net.head.weight.shape == (50, 16)


def test_refused_on_other_kinds_and_with_labelled_data(tmp_path: Path) -> None:
    for kind, article in (("encoder_decoder", "an"), ("decoder_only", "a")):
        p = write(tmp_path, MLM.replace("kind: encoder_only", f"kind: {kind}").replace(
            "  encoder: {layers: 2, heads: 2, d_ff: 32}\n", "" if kind == "decoder_only" else
            "  encoder: {layers: 2, heads: 2, d_ff: 32}\n"))
        assert f"model.head: {article} {kind} model has no head" in error_of(p)
    p = write(tmp_path, MLM.replace("  dataset: text\n", "  dataset: {kind: tagging, source: files}\n")
              .replace("t.txt", "t").replace("v.txt", "v"))
    message = error_of(p)
    assert message.startswith(f"{p}:5:3: model.head: a masked_lm head predicts hidden pieces of plain text, and "
                              "data.dataset tagging is not one side of text")
    p = write(tmp_path, MLM.replace("  dataset: text\n", ""))
    assert "plain text, and data.dataset is not set: set data.dataset to text" in error_of(p)


def test_masking_is_checked(tmp_path: Path) -> None:
    p = write(tmp_path, MLM + "  masking: {mask: 0.95, random: 0.1}\n")
    assert "data.masking.random: mask (0.95) + random (0.1) exceed 1" in error_of(p)
    p = write(tmp_path, MLM + "  masking: {rate: 0}\n")
    assert "data.masking.rate" in error_of(p)
    tagger = MLM.replace("{kind: masked_lm}", "{kind: token_classification, labels: [A, B]}").replace(
        "  dataset: text\n", "  dataset: {kind: tagging, source: files}\n") + "  masking: {copies: 2}\n"
    assert "data.masking: data.masking hides pieces for a masked LM" in error_of(write(tmp_path, tagger))
    spec = load_spec(write(tmp_path, MLM + "  masking: {copies: 3, seed: 7}\n")).spec
    assert spec.data.masking is not None and (spec.data.masking.copies, spec.data.masking.seed) == (3, 7)


def test_the_shipped_examples_share_the_taggers_encoder() -> None:
    """mlm-en.yaml pretrains the encoder pos-tagger-pretrained.yaml starts from: every encoder tensor has
    the same name and shape in both (the vocabulary from the same tokenizer)."""
    mlm = load_spec(GRAPHS / "mlm-en.yaml").spec
    tagger = load_spec(GRAPHS / "pos-tagger-pretrained.yaml").spec
    assert mlm.model.head.kind == "masked_lm" and mlm.data.dataset.side == "en"  # type: ignore[union-attr]
    assert tagger.train.init is not None and tagger.train.init.source == "runs/mlm-en"
    assert tagger.train.init.vocab == "refuse" and tagger.data.tokenizer.model is None  # takes the MLM's tokenizer
    size = {"model.vocab_size=4001", "model.head.labels=[A, B]"}
    with torch.device("meta"):
        a = build_model(load_spec(GRAPHS / "mlm-en.yaml", ["model.vocab_size=4001"]).spec)
        b = build_model(load_spec(GRAPHS / "pos-tagger-pretrained.yaml", sorted(size)).spec)
    shapes = lambda net: {n: p.shape for n, p in net.named_parameters() if not n.startswith("head.")}  # noqa: E731
    assert shapes(a) == shapes(b)
