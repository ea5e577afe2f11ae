"""CTranslate2 export: every mapped variant round-trips (greedy outputs identical, teacher-forced
log-probs within 1e-4 in float32); everything else is refused by kind."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tbuild.builder import build_model, load_spec
from tbuild.components.specs.special import BOS, EOS
from tbuild.engine.decoding.search import greedy_search
from tbuild.engine.export.ctranslate2 import write_ctranslate2
from tbuild.engine.export.targets import CTRANSLATE2, UnsupportedExport, check_exportable
from tests.conftest import TINY

ctranslate2 = pytest.importorskip("ctranslate2", reason="ctranslate2 not installed (pip install -e '.[export]')")

VARIANTS = {
    "post-norm (paper)": [],
    "pre-norm": ["model.norm_placement=pre"],
    "pre-norm, no final norm": ["model.norm_placement=pre", "model.final_norm=false"],
    "rmsnorm": ["model.norm={kind: rmsnorm}", "model.norm_placement=pre"],
    "layernorm eps 1e-2": ["model.norm={kind: layernorm, eps: 0.01}"],
    "gelu": ["model.ffn={kind: gelu}"],
    "silu": ["model.ffn={kind: silu}"],
    "gelu_tanh": ["model.ffn={kind: gelu_tanh}"],
    "swiglu": ["model.ffn={kind: swiglu}"],
    "grouped-query": ["model.attention={kind: multihead, kv_heads: 2}",
                      "model.cross_attention={kind: multihead, kv_heads: 2}"],
    "multi-query": ["model.attention={kind: multihead, kv_heads: 1}",
                    "model.cross_attention={kind: multihead, kv_heads: 1}"],
    "no biases": ["model.attention={kind: multihead, bias: false}",
                  "model.cross_attention={kind: multihead, bias: false}"],
    "learned positions": ["model.positional={kind: learned}", "model.max_positions=32"],
    "no positions": ["model.positional={kind: none}"],
    "unscaled embeddings": ["model.scale_embeddings=false"],
    "untied": ["model.tie_embeddings=none", "model.src_vocab_size=30"],
    "decoder-tied": ["model.tie_embeddings=decoder"],
    "d_k != d_model/heads": ["model.encoder.d_k=8", "model.encoder.d_v=8", "model.decoder.d_k=8",
                             "model.decoder.d_v=8"],
}
VOCAB = ["<pad>", "<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(4, 40)]


def _export(overrides: list[str], tmp_path: Path):  # noqa: ANN202
    spec = load_spec(TINY, overrides).spec
    model = build_model(spec).eval()
    write_ctranslate2(model, spec, VOCAB, tmp_path / "ct2")
    return spec, model, ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu")


def _batch(src_vocab: int) -> tuple[list[list[int]], list[list[int]]]:
    g = torch.Generator().manual_seed(1)
    srcs = [torch.randint(4, src_vocab, (n,), generator=g).tolist() for n in (5, 9, 3)]
    tgts = [torch.randint(4, 40, (n,), generator=g).tolist() for n in (6, 4, 7)]
    return srcs, tgts


@pytest.mark.parametrize("overrides", VARIANTS.values(), ids=VARIANTS.keys())
def test_round_trip(overrides: list[str], tmp_path: Path) -> None:
    spec, model, ct2 = _export(overrides, tmp_path)
    srcs, tgts = _batch(spec.src_vocab_size())
    scored = ct2.score_batch([[VOCAB[i] for i in s] for s in srcs], [[VOCAB[i] for i in t] for t in tgts])
    for s, t, r in zip(srcs, tgts, scored, strict=True):
        with torch.no_grad():
            logp = model(torch.tensor([s + [EOS]]), torch.tensor([[BOS] + t]))[0].log_softmax(-1)
        ours = logp.gather(-1, torch.tensor(t + [EOS])[:, None]).squeeze(-1)
        assert torch.allclose(ours, torch.tensor(r.log_probs), atol=1e-4, rtol=0)
    for s in srcs:  # greedy, one sentence at a time: the same limit |Y| ≤ |X| + 5 in both
        ours = greedy_search(model, torch.tensor([s + [EOS]]), max_len_a=1.0, max_len_b=5)[0]
        theirs = ct2.translate_batch([[VOCAB[i] for i in s]], beam_size=1, min_decoding_length=0,
                                     max_decoding_length=len(s) + 5, suppress_sequences=[["<pad>"], ["<s>"]])
        assert [VOCAB[i] for i in ours] == theirs[0].hypotheses[0]


def test_layer_norm_epsilon_is_honoured(tmp_path: Path) -> None:
    """The runtime reads the norms' epsilon from the config: a wrong one shows in the log-probs."""
    spec, model, _ = _export(["model.norm={kind: layernorm, eps: 0.5}"], tmp_path)
    wrong = load_spec(TINY, ["model.norm={kind: layernorm, eps: 1.0e-6}"]).spec
    write_ctranslate2(model, wrong, VOCAB, tmp_path / "wrong")
    right, bad = (ctranslate2.Translator(str(tmp_path / d), device="cpu") for d in ("ct2", "wrong"))
    src, tgt = [["w5", "w6", "w7"]], [["w8", "w9"]]
    diff = abs(right.score_batch(src, tgt)[0].log_probs[0] - bad.score_batch(src, tgt)[0].log_probs[0])
    assert diff > 1e-3


REFUSED = {
    "local": ["model.attention={kind: local}"],
    "additive": ["model.attention={kind: additive}"],
    "relative": ["model.attention={kind: relative}"],
    "rope": ["model.positional={kind: rope}"],
    "alibi": ["model.positional={kind: alibi}"],
}


@pytest.mark.parametrize("kind", REFUSED)
def test_refused_kinds_name_kind_and_what_is_supported(kind: str) -> None:
    spec = load_spec(TINY, REFUSED[kind]).spec
    with pytest.raises(UnsupportedExport, match=rf"kind '{kind}'.*ctranslate2 supports") as e:
        check_exportable(spec, CTRANSLATE2)
    assert len(str(e.value).splitlines()) == 1


@pytest.mark.parametrize("overrides, what", [
    (["model.final_norm=true"], "final norm after post-norm"),
    (["model.encoder.d_v=8"], "d_k"),
    (["model.attention={kind: multihead, kv_heads: 2}"], "kv_heads"),
    (["model.encoder.norm={kind: rmsnorm}"], "norms differ"),
])
def test_refused_structures(overrides: list[str], what: str) -> None:
    with pytest.raises(UnsupportedExport, match=what):
        check_exportable(load_spec(TINY, overrides).spec, CTRANSLATE2)


def test_newly_registered_kind_is_refused(dummy_attention: None) -> None:
    spec = load_spec(TINY, ["model.attention={kind: dummy_export_test}"]).spec
    build_model(spec)  # a valid model tbuild can build...
    with pytest.raises(UnsupportedExport, match="attention kind 'dummy_export_test'.*supports attention: multihead"):
        check_exportable(spec, CTRANSLATE2)  # ...that the export refuses rather than mis-exports
