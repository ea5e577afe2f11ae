"""BERT's three parts tbuild declares in the spec, each off by default: ``model.embedding_norm`` (a norm on the
embedding sum, before dropout), a sequence classifier's ``dense`` (tanh(W·pooled + b) before the output layer,
BERT's pooler) and a masked LM's ``transform`` (dense, exact GELU, norm before the output layer), checked by
hand; off, the architecture hash of a spec is what it was before they existed, and inspect counts them."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tbuild.builder import build_model, load_spec
from tbuild.builder.inspect import inspect_model

BASE = {"kind": "encoder_only", "d_model": 8, "vocab_size": 20, "encoder": {"layers": 1, "heads": 2, "d_ff": 16},
        "positional": {"kind": "learned"}, "max_positions": 12, "norm_placement": "post", "scale_embeddings": False,
        "norm": {"kind": "layernorm", "eps": 1e-12}, "dropout": {"residual": 0.0, "embedding": 0.0, "attention": 0.0}}
TAGGER = {"kind": "token_classification", "labels": ["a", "b", "c"]}


DATASETS = {"token_classification": {"kind": "tagging"}, "sequence_classification": {"kind": "classification"},
            "masked_lm": "text"}


def _model(head: dict, **fields: object) -> tuple[object, torch.nn.Module]:
    data = {"tokenizer": {"vocab_size": 20}, "dataset": DATASETS[head["kind"]]}
    spec = load_spec({"name": "t", "model": {**BASE, "head": head, **fields}, "data": data}).spec
    torch.manual_seed(0)
    model = build_model(spec).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)  # norm gains off 1, biases off 0
    return spec, model


IDS = torch.tensor([[2, 5, 6, 7, 3], [2, 9, 3, 0, 0]])


def test_the_embedding_norm_normalises_the_sum_of_tokens_and_positions() -> None:
    _, model = _model(TAGGER, embedding_norm=True)
    e = model.src_embed
    tokens, positions = e.tokens(IDS), e.positional.embedding.weight[: IDS.size(1)]
    expected = F.layer_norm(tokens + positions, (8,), e.norm.weight, e.norm.bias, eps=1e-12)
    assert torch.allclose(e(IDS), expected, atol=1e-6)
    _, plain = _model(TAGGER)
    assert plain.src_embed.norm is None and "src_embed.norm.weight" not in dict(plain.named_parameters())


def test_the_dense_pooler_is_tanh_of_a_linear_map_of_the_first_state() -> None:
    _, model = _model({"kind": "sequence_classification", "labels": ["x", "y"], "pooling": "first", "dense": True})
    head = model.head
    states, pad = model.encode(IDS)
    expected = F.linear(torch.tanh(head.dense(states[:, 0])), head.weight, head.bias)
    assert torch.allclose(model(IDS)[:, 0], expected, atol=1e-6)


def test_the_masked_lm_transform_is_dense_gelu_norm_before_the_tied_output() -> None:
    _, model = _model({"kind": "masked_lm", "transform": True})
    head = model.head
    assert head.weight is model.src_embed.tokens.weight and head.norm.eps == 1e-12
    states, _ = model.encode(IDS)
    moved = F.layer_norm(F.gelu(head.dense(states)), (8,), head.norm.weight, head.norm.bias, eps=1e-12)
    assert torch.allclose(model(IDS), F.linear(moved, head.weight, head.bias), atol=1e-5)


def test_off_they_leave_the_architecture_hash_and_on_inspect_counts_them() -> None:
    spec, _ = _model(TAGGER)
    same, _ = _model(TAGGER, embedding_norm=False)
    assert spec.architecture_hash() == same.architecture_hash()
    seq = {"kind": "sequence_classification", "labels": ["x", "y"]}
    assert _model(seq)[0].architecture_hash() == _model({**seq, "dense": False})[0].architecture_hash()
    assert _model(seq)[0].architecture_hash() != _model({**seq, "dense": True})[0].architecture_hash()
    for head, fields in ((TAGGER, {"embedding_norm": True}), ({"kind": "masked_lm", "transform": True}, {}),
                         ({**seq, "dense": True}, {})):
        spec, model = _model(head, **fields)
        assert inspect_model(spec, model).total == sum(p.numel() for p in model.parameters())
