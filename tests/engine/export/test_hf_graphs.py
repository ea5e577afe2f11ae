"""Decoder-only models to GPT2LMHeadModel / LlamaForCausalLM and CTranslate2's Generator, encoder-only
taggers to XLMRobertaXLForTokenClassification: each mapped variant round-trips through save_pretrained /
from_pretrained (logits within 1e-4 in float32, greedy continuations or predicted labels identical), and
post-norm taggers with an embedding norm to BertForTokenClassification, everything no mapped class computes is
refused in one line naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tbuild.builder import build_model, load_spec
from tbuild.builder.resolved import resolve
from tbuild.components.specs.special import BOS, EOS, PAD
from tbuild.engine.export.targets import HF, UnsupportedExport, check_exportable, describe_targets, export_class
from tbuild.engine.hf.llama import half_split
from tbuild.engine.hf.writer import to_hf

transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install -e '.[export]')")

LM = {"kind": "decoder_only", "vocab_size": 40, "d_model": 16, "decoder": {"layers": 2, "heads": 4, "d_ff": 32},
      "norm_placement": "pre", "max_positions": 24, "scale_embeddings": False}
TEXT = {"dataset": "text", "train": "t", "valid": "v"}
LLAMA = {"positional": {"kind": "rope"}, "ffn": {"kind": "swiglu"}, "norm": {"kind": "rmsnorm"}}
LM_VARIANTS = {
    "gpt2 learned gelu tied": ("GPT2LMHeadModel", {"positional": {"kind": "learned"}, "ffn": {"kind": "gelu"}}),
    "gpt2 sinusoidal, scaled untied, no biases, eps 1e-6": ("GPT2LMHeadModel", {
        "tie_embeddings": "none", "scale_embeddings": True, "attention": {"kind": "multihead", "bias": False}}),
    "gpt2 no positions": ("GPT2LMHeadModel", {"positional": {"kind": "none"}, "norm": {"kind": "layernorm",
                                                                                      "eps": 1e-5}}),
    "llama tied, biases": ("LlamaForCausalLM", LLAMA),
    "llama untied scaled, kv_heads 2, base 500": ("LlamaForCausalLM", LLAMA | {
        "positional": {"kind": "rope", "base": 500.0}, "tie_embeddings": "none", "scale_embeddings": True,
        "attention": {"kind": "multihead", "bias": False, "kv_heads": 2}}),
    "llama d_k 8 (heads · d_k ≠ d_model)": ("LlamaForCausalLM", LLAMA | {
        "decoder": {"layers": 1, "heads": 4, "d_ff": 32, "d_k": 8, "d_v": 8}}),
}


def _perturbed(spec):  # noqa: ANN001, ANN202
    """The spec's model with every parameter moved off its init (norm gains ≠ 1, biases ≠ 0)."""
    model = build_model(spec).eval()
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.3)
    return model


def to_hf_graph(model: torch.nn.Module, spec):  # noqa: ANN001, ANN201 - a PreTrainedModel
    """The in-memory export of the class the export check chooses."""
    return to_hf(model, spec, export_class(spec, resolve(spec.model), "hf", lambda what: None))


def _lm(overrides: dict):  # noqa: ANN202
    spec = load_spec({"model": LM | overrides, "data": TEXT}, []).spec
    return spec, _perturbed(spec)


def _greedy(model: torch.nn.Module, prompt: list[int], steps: int) -> list[int]:
    """tbuild's greedy continuation, whole sequence re-run each step (PAD and BOS never chosen)."""
    ids = list(prompt)
    for _ in range(steps):
        with torch.no_grad():
            logits = model.decode(torch.tensor([ids]))[0, -1]
        logits[[PAD, BOS]] = float("-inf")
        ids.append(int(logits.argmax()))
        if ids[-1] == EOS:
            break
    return ids


@pytest.mark.parametrize(("cls", "overrides"), LM_VARIANTS.values(), ids=LM_VARIANTS.keys())
def test_decoder_only_round_trip(cls: str, overrides: dict, tmp_path: Path) -> None:
    spec, model = _lm(overrides)
    to_hf_graph(model, spec).save_pretrained(tmp_path / "hf")
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    assert type(hf).__name__ == cls
    ids = torch.randint(4, 40, (3, 20), generator=torch.Generator().manual_seed(1))
    ids[:, 0] = BOS
    with torch.no_grad():
        assert (model.decode(ids) - hf(input_ids=ids).logits).abs().max() < 1e-4
    for prompt in ([BOS], [BOS, 5, 6], [BOS, 9, 10, 11, 12]):
        ours = _greedy(model, prompt, 10)
        theirs = hf.generate(torch.tensor([prompt]), max_new_tokens=10, do_sample=False, eos_token_id=EOS,
                             suppress_tokens=[PAD, BOS], pad_token_id=PAD)[0].tolist()
        assert ours == theirs


def test_half_split_moves_each_heads_pairs_to_llamas_halves() -> None:
    rows = torch.arange(8.0)[:, None]  # two heads of d_k 4: pairs (0,1) (2,3) | (4,5) (6,7)
    assert half_split(4).out(rows).squeeze(1).tolist() == [0, 2, 1, 3, 4, 6, 5, 7]
    assert half_split(4).back(half_split(4).out(rows)).equal(rows)  # and back, as the import reads it


CT2_VARIANTS = {k: LM_VARIANTS[k][1] for k in ("gpt2 learned gelu tied",
                                               "gpt2 sinusoidal, scaled untied, no biases, eps 1e-6",
                                               "llama tied, biases", "llama untied scaled, kv_heads 2, base 500")}


@pytest.mark.parametrize("overrides", CT2_VARIANTS.values(), ids=CT2_VARIANTS.keys())
def test_decoder_only_to_ctranslate2(overrides: dict, tmp_path: Path) -> None:
    ctranslate2 = pytest.importorskip("ctranslate2", reason="ctranslate2 not installed (pip install -e '.[export]')")
    from tbuild.engine.export.ct2_graphs import write_ct2_graph

    spec, model = _lm(overrides)
    pieces = ["<pad>", "<unk>", "<s>", "</s>"] + [f"p{i}" for i in range(4, 40)]
    write_ct2_graph(model, spec, export_class(spec, resolve(spec.model), "ctranslate2", lambda what: None), pieces,
                    tmp_path / "ct2")
    generator = ctranslate2.Generator(str(tmp_path / "ct2"), device="cpu")
    seq = [BOS, 5, 6, 7, 8, 9, 10]
    with torch.no_grad():
        ours = model.decode(torch.tensor([seq]))[0, :-1].log_softmax(-1).gather(-1, torch.tensor(seq[1:])[:, None])
    theirs = torch.tensor(generator.score_batch([[pieces[i] for i in seq]])[0].log_probs)
    assert (ours.squeeze(-1) - theirs).abs().max() < 1e-4
    for prompt in ([BOS, 5, 6], [BOS, 9, 10, 11, 12]):
        result = generator.generate_batch([[pieces[i] for i in prompt]], max_length=len(prompt) - 1 + 10,
                                          sampling_topk=1, end_token=pieces[EOS],
                                          suppress_sequences=[[pieces[PAD]], [pieces[BOS]]])
        assert [i for i in _greedy(model, prompt, 10)[1:] if i != EOS] == result[0].sequences_ids[0]


TAGGER = {"kind": "encoder_only", "vocab_size": 40, "d_model": 16, "norm_placement": "pre",
          "encoder": {"layers": 2, "heads": 4, "d_ff": 32}, "head": {"kind": "token_classification",
                                                                    "labels": ["DT", "NN", "VB"]}}
TAGGING = {"dataset": {"kind": "tagging", "source": "files"}, "train": "t", "valid": "v"}
BERT = {"norm_placement": "post", "embedding_norm": True, "norm": {"kind": "layernorm", "eps": 1e-12}}
TAGGER_VARIANTS = {
    "sinusoidal relu, scaled": ("XLMRobertaXLForTokenClassification", {}),
    "learned gelu, no biases": ("XLMRobertaXLForTokenClassification", {
        "positional": {"kind": "learned"}, "max_positions": 30, "ffn": {"kind": "gelu"},
        "attention": {"kind": "multihead", "bias": False}, "head": TAGGER["head"] | {"bias": False, "piece": "last"}}),
    "post-norm, embedding norm: BERT, sinusoidal, scaled": ("BertForTokenClassification", BERT),
    "BERT learned gelu, no biases, eps 1e-5": ("BertForTokenClassification", BERT | {
        "positional": {"kind": "learned"}, "max_positions": 30, "ffn": {"kind": "gelu"},
        "norm": {"kind": "layernorm", "eps": 1e-5}, "attention": {"kind": "multihead", "bias": False}}),
}


@pytest.mark.parametrize(("cls", "overrides"), TAGGER_VARIANTS.values(), ids=TAGGER_VARIANTS.keys())
def test_tagger_round_trip(cls: str, overrides: dict, tmp_path: Path) -> None:
    spec = load_spec({"model": TAGGER | overrides, "data": TAGGING}, []).spec
    model = _perturbed(spec)
    to_hf_graph(model, spec).save_pretrained(tmp_path / "hf")
    hf = transformers.AutoModelForTokenClassification.from_pretrained(tmp_path / "hf").eval()
    assert type(hf).__name__ == cls
    assert hf.config.id2label == {0: "DT", 1: "NN", 2: "VB"}
    assert hf.config.tbuild_word_piece == spec.model.head.piece  # type: ignore[union-attr]  # read labels there
    src = torch.tensor([[5, 6, 7, 8, 9, EOS], [5, 6, 7, EOS, PAD, PAD]])  # padded: the mask matters
    keep = src.ne(PAD)
    with torch.no_grad():
        ours, theirs = model(src, None, ~keep), hf(input_ids=src, attention_mask=keep.long()).logits
    assert (ours - theirs)[keep].abs().max() < 1e-4
    assert torch.equal(ours.argmax(-1)[keep], theirs.argmax(-1)[keep])


CLASSIFIER = {"kind": "sequence_classification", "labels": ["neg", "pos"], "pooling": "first", "dense": True}
CLASSIFY = {"dataset": {"kind": "classification"}, "train": "t", "valid": "v"}
BERT_HEADS = {
    "classifier": ("BertForSequenceClassification", "AutoModelForSequenceClassification", CLASSIFIER, CLASSIFY, BERT),
    "masked LM, tied": ("BertForMaskedLM", "AutoModelForMaskedLM", {"kind": "masked_lm", "transform": True}, TEXT,
                        BERT),
    "pre-norm classifier": ("XLMRobertaXLForSequenceClassification", "AutoModelForSequenceClassification",
                            CLASSIFIER, CLASSIFY, {}),
    "pre-norm masked LM, untied, relu FFN": ("XLMRobertaXLForMaskedLM", "AutoModelForMaskedLM", {
        "kind": "masked_lm", "transform": True}, TEXT, {"tie_embeddings": "none", "ffn": {"kind": "relu"}}),
}


@pytest.mark.parametrize(("cls", "auto", "head", "data", "fields"), BERT_HEADS.values(), ids=BERT_HEADS.keys())
def test_classifier_and_masked_lm_round_trip(cls: str, auto: str, head: dict, data: dict, fields: dict,
                                             tmp_path: Path) -> None:
    model_spec = TAGGER | {"head": head, "ffn": {"kind": "gelu"}, "scale_embeddings": False,
                           "positional": {"kind": "learned"}, "max_positions": 30} | fields
    spec = load_spec({"model": model_spec, "data": data}, []).spec
    model = _perturbed(spec)
    to_hf_graph(model, spec).save_pretrained(tmp_path / "hf")
    hf = getattr(transformers, auto).from_pretrained(tmp_path / "hf").eval()
    assert type(hf).__name__ == cls
    src = torch.tensor([[BOS, 5, 6, 7, 8, 9, EOS], [BOS, 5, 6, 7, EOS, PAD, PAD]])
    keep = src.ne(PAD)
    with torch.no_grad():
        ours, theirs = model(src, None, ~keep), hf(input_ids=src, attention_mask=keep.long()).logits
    if head["kind"] == "sequence_classification":
        assert (ours[:, 0] - theirs).abs().max() < 1e-4
    else:
        assert hf.config.tie_word_embeddings == (spec.model.tie_embeddings != "none")
        assert (ours - theirs)[keep].abs().max() < 1e-4


def test_bert_heads_refuse_what_bert_lacks() -> None:
    classify = {"dataset": {"kind": "classification"}, "train": "t", "valid": "v"}
    cases = [({"kind": "sequence_classification", "labels": ["a", "b"]}, classify, {},
              "model.head pooling mean, dense false (BERT's and RoBERTa's classifiers pool the first position"),
             ({"kind": "masked_lm"}, TEXT, {"ffn": {"kind": "gelu"}}, "model.head.transform false"),
             ({"kind": "masked_lm", "transform": True}, TEXT, {}, "model.ffn relu with a masked_lm head"),
             ({"kind": "masked_lm", "transform": True}, TEXT, {"ffn": {"kind": "gelu"}, "scale_embeddings": True},
              "model.scale_embeddings true with a tied output")]
    for head, data, fields, why in cases:
        spec = load_spec({"model": TAGGER | BERT | {"head": head} | fields, "data": data}, []).spec
        with pytest.raises(UnsupportedExport, match="cannot export an encoder_only model to hf") as e:
            check_exportable(spec, HF)
        assert why in str(e.value) and "\n" not in str(e.value)


REFUSED = {
    "post-norm": ({"norm_placement": "post"}, "model.norm_placement post"),
    "alibi": ({"positional": {"kind": "alibi"}}, "model.positional alibi"),
    "rope with LayerNorm": ({"positional": {"kind": "rope"}}, "model.positional rope with ffn relu and norm layernorm"),
    "tied and scaled": ({"scale_embeddings": True}, "model.scale_embeddings true with a tied output"),
    "swiglu without rope": ({"ffn": {"kind": "swiglu"}}, "model.ffn swiglu and model.norm layernorm"),
    "gpt2 kv_heads": ({"attention": {"kind": "multihead", "kv_heads": 2}}, "kv_heads 2"),
    "no final norm": ({"final_norm": False}, "has no final norm"),
    "parallel layers": ({"decoder": {"layers": 2, "heads": 4, "d_ff": 32, "order": "parallel"}}, "order"),
    "local attention": ({"attention": {"kind": "local", "window": 4}}, "attention kind 'local'"),
    "embedding norm": ({"embedding_norm": True}, "model.embedding_norm true"),
}


@pytest.mark.parametrize(("overrides", "why"), REFUSED.values(), ids=REFUSED.keys())
def test_decoder_only_refusals_name_the_field(overrides: dict, why: str) -> None:
    spec = load_spec({"model": LM | overrides, "data": TEXT}, []).spec
    with pytest.raises(UnsupportedExport, match="cannot export a decoder_only model to hf") as e:
        check_exportable(spec, HF)
    assert why in str(e.value) and "\n" not in str(e.value)


def test_tagger_refusals_and_validate_lines() -> None:
    post = load_spec({"model": TAGGER | {"norm_placement": "post"}, "data": TAGGING}, []).spec
    assert ("hf: no (cannot export an encoder_only model to hf: model.embedding_norm false with post-norm layers (the "
            "post-norm class mapped, BERT, normalises its embeddings") in describe_targets(post)[1]
    pre = load_spec({"model": TAGGER | {"embedding_norm": True}, "data": TAGGING}, []).spec
    assert "model.embedding_norm true with pre-norm layers" in describe_targets(pre)[1]
    mixed = load_spec({"model": TAGGER | BERT | {"encoder": {"layers": 2, "heads": 4, "d_ff": 32, "norm": {
        "kind": "layernorm", "eps": 1e-6}}}, "data": TAGGING}, []).spec
    assert "model.norm differs from the layers' norm" in describe_targets(mixed)[1]
    relative = load_spec({"model": TAGGER | {"attention": {"kind": "relative", "max_distance": 8},
                                             "positional": {"kind": "none"}}, "data": TAGGING}, []).spec
    assert "attention kind 'relative'" in describe_targets(relative)[1]  # was an AttributeError (no kv_heads)
    classify = {"dataset": {"kind": "classification"}, "train": "t", "valid": "v"}
    seq = load_spec({"model": TAGGER | {"head": {"kind": "sequence_classification", "labels": ["a", "b"]}},
                     "data": classify}, []).spec
    assert "model.head pooling mean, dense false" in describe_targets(seq)[1]
    ok = load_spec({"model": TAGGER, "data": TAGGING}, []).spec
    assert describe_targets(ok)[1] == "hf: yes"
    assert "ctranslate2: no (cannot export an encoder_only model" in describe_targets(ok)[0]
    lm = load_spec({"model": LM | LLAMA, "data": TEXT}, []).spec
    assert describe_targets(lm) == ["ctranslate2: yes", "hf: yes"]
