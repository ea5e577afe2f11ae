"""`tbuild import hf` of encoders: tiny BERT, RoBERTa and XLM-RoBERTa models with a token-classification, sequence-
classification or masked-LM head (headless ones: test_import_headless.py), built from configs with random weights
(no download), saved beside a tiny sentencepiece model and imported as run directories. The imported model's scores
are HF's within 1e-4 (float32), a tagger's labels HF's argmax; what tbuild lacks is refused in one line naming the
config field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.components.specs.special import BOS, EOS, PAD
from tbuild.engine.data.tokenizer import Tokenizer

from .test_import_hf import VOCAB, _assert_round_trip, _import, _loaded, _perturbed, _refused

transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install -e '.[export]')")

BERT = {"vocab_size": VOCAB, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 32, "max_position_embeddings": 24, "pad_token_id": PAD, "type_vocab_size": 2}
ROBERTA = BERT | {"bos_token_id": BOS, "eos_token_id": EOS, "max_position_embeddings": 25, "type_vocab_size": 1}
LABELS = {"num_labels": 3, "id2label": {0: "NOUN", 1: "VERB", 2: "DET"}}
ENCODERS = {
    "bert tagger": ("bert", "BertForTokenClassification", LABELS),
    "bert tagger relu, eps 1e-5": ("bert", "BertForTokenClassification", {"hidden_act": "relu",
                                                                         "layer_norm_eps": 1e-5}),
    "bert tagger gelu_pytorch_tanh": ("bert", "BertForTokenClassification", {**LABELS,
                                                                             "hidden_act": "gelu_pytorch_tanh"}),
    "bert classifier": ("bert", "BertForSequenceClassification", LABELS),
    "bert masked LM": ("bert", "BertForMaskedLM", {}),
    "bert masked LM untied": ("bert", "BertForMaskedLM", {"tie_word_embeddings": False}),
    "roberta classifier": ("roberta", "RobertaForSequenceClassification", LABELS),
    "roberta masked LM": ("roberta", "RobertaForMaskedLM", {}),
    "xlm-roberta tagger": ("xlm-roberta", "XLMRobertaForTokenClassification", LABELS),
    "xlm-roberta-xl tagger (pre-norm)": ("xlm-roberta-xl", "XLMRobertaXLForTokenClassification", LABELS),
    "xlm-roberta-xl classifier": ("xlm-roberta-xl", "XLMRobertaXLForSequenceClassification", LABELS),
    "xlm-roberta-xl masked LM": ("xlm-roberta-xl", "XLMRobertaXLForMaskedLM", {}),
}
CONFIGS = {"bert": ("BertConfig", BERT), "roberta": ("RobertaConfig", ROBERTA),
           "xlm-roberta": ("XLMRobertaConfig", ROBERTA), "xlm-roberta-xl": ("XLMRobertaXLConfig", ROBERTA)}


def encoder_folder(family: str, class_name: str, overrides: dict, tok: Tokenizer, folder: Path):  # noqa: ANN201
    """A random ``class_name`` saved into ``folder`` with tokenizer.model."""
    config_class, base = CONFIGS[family]
    torch.manual_seed(0)
    hf = _perturbed(getattr(transformers, class_name)(getattr(transformers, config_class)(**(base | overrides))))
    hf.save_pretrained(folder)
    (folder / "tokenizer.model").write_bytes(tok.path.read_bytes())
    return hf


def _batch() -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    rows = [[BOS, *torch.randint(4, VOCAB, (n,), generator=g).tolist(), EOS] for n in (9, 4, 6)]
    width = max(map(len, rows))
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows])


@pytest.mark.parametrize(("family", "class_name", "overrides"), ENCODERS.values(), ids=ENCODERS)
def test_encoder_scores_match_hf(family: str, class_name: str, overrides: dict, spm: Tokenizer,
                                 tmp_path: Path) -> None:
    hf = encoder_folder(family, class_name, overrides, spm, tmp_path / "hf")
    assert "encoder_only" in _import(tmp_path / "hf", tmp_path / "run")
    spec, model = _loaded(tmp_path / "run")
    pre = family == "xlm-roberta-xl"
    assert spec.model.norm_placement == ("pre" if pre else "post") and spec.model.embedding_norm != pre
    ids = _batch()
    with torch.no_grad():
        ours, theirs = model(ids, None, ids.eq(PAD)), hf(input_ids=ids, attention_mask=ids.ne(PAD)).logits
    if class_name.endswith("ForSequenceClassification"):
        assert spec.model.head.pooling == "first" and spec.model.head.dense
        assert (ours[:, 0] - theirs).abs().max().item() < 1e-4
        return
    keep = ids.ne(PAD)
    assert (ours - theirs)[keep].abs().max().item() < 1e-4
    if class_name.endswith("ForTokenClassification"):
        assert spec.model.head.labels == [hf.config.id2label[i] for i in range(hf.config.num_labels)]
        assert torch.equal(ours.argmax(-1)[keep], theirs.argmax(-1)[keep])


VALID = {"ForTokenClassification": ("valid.words", "ab ba cab\ncc aab\n"),
         "ForSequenceClassification": ("valid.tsv", "NOUN\tab ba cab\nDET\tcc aab\nVERB\tb\n"),
         "ForMaskedLM": ("valid.txt", "ab ba cab\ncc aab bbc a\n")}
ROUND_TRIPS = [(family, prefix + head) for family, prefix in (("bert", "Bert"), ("xlm-roberta-xl", "XLMRobertaXL"))
               for head in VALID]


@pytest.mark.parametrize(("family", "class_name"), ROUND_TRIPS, ids=[c for _, c in ROUND_TRIPS])
def test_import_export_import_is_the_identity_and_the_export_checks_parity(family: str, class_name: str,
                                                                           spm: Tokenizer, tmp_path: Path) -> None:
    """BERT's and XLM-RoBERTa-XL's three heads export back to their class (docs/export.md), tensor for tensor;
    the export's parity check reads each head's own valid split (words, LABEL<TAB>TEXT lines, plain text)."""
    tagger = class_name.endswith("ForTokenClassification")
    extra = {"tbuild_word_piece": "last"} if tagger else {}
    encoder_folder(family, class_name, (LABELS if "Classification" in class_name else {}) | extra, spm,
                   tmp_path / "hf")
    _import(tmp_path / "hf", tmp_path / "run")
    spec, _ = _loaded(tmp_path / "run")
    assert spec.model.head.kind != "token_classification" or spec.model.head.piece == "last"
    _assert_round_trip(tmp_path)
    name, text = next(v for suffix, v in VALID.items() if class_name.endswith(suffix))
    (tmp_path / name).write_text(text)
    (tmp_path / "valid.tags").write_text("NOUN VERB DET\nDET NOUN\n")
    valid = tmp_path / (name if not tagger else "valid")
    result = CliRunner().invoke(app, ["export", str(tmp_path / "run"), "-o", str(tmp_path / "checked"), "--to", "hf",
                                      "--set", f"data.valid={valid}"])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "checked" / "graph-parity.json").read_text())
    assert report["max_logit_diff"] < 1e-4 and report["identical"] == 1.0 and report["outputs"] >= 3


REFUSED = {
    "quick_gelu": ("bert", "BertForTokenClassification", {"hidden_act": "quick_gelu"},
                   "config.json hidden_act 'quick_gelu'"),
    "roberta's own pad id": ("roberta", "RobertaForMaskedLM", {"pad_token_id": 1}, "config.json pad_token_id 1"),
    "regression": ("bert", "BertForSequenceClassification", {"num_labels": 1}, "config.json num_labels 1"),
    "relative positions": ("bert", "BertForMaskedLM", {"position_embedding_type": "relative_key"},
                           "config.json position_embedding_type 'relative_key'"),
    "relu masked LM": ("bert", "BertForMaskedLM", {"hidden_act": "relu"}, "config.json hidden_act 'relu'"),
}


@pytest.mark.parametrize(("family", "class_name", "overrides", "expected"), REFUSED.values(), ids=REFUSED)
def test_encoder_refusals_are_one_line(family: str, class_name: str, overrides: dict, expected: str,
                                       spm: Tokenizer, tmp_path: Path) -> None:
    folder = tmp_path / "hf"
    safe = {k: v for k, v in overrides.items() if k not in ("hidden_act", "position_embedding_type", "pad_token_id")}
    encoder_folder(family, class_name, safe, spm, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | overrides))
    _refused([str(folder)], tmp_path / "run", expected)


def test_another_encoder_class_is_refused_naming_the_architectures(spm: Tokenizer, tmp_path: Path) -> None:
    """A head tbuild lacks (BERT's pretraining heads); the headless BertModel imports (test_import_headless)."""
    folder = tmp_path / "hf"
    encoder_folder("bert", "BertForMaskedLM", {}, spm, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"architectures": ["BertForPreTraining"]}))
    _refused([str(folder)], tmp_path / "run", "config.json architectures ['BertForPreTraining']: tbuild imports "
             "BertForTokenClassification, BertForSequenceClassification, BertForMaskedLM, BertModel")


@pytest.mark.parametrize(("family", "class_name", "overrides"), [
    ("roberta", "RobertaForSequenceClassification", LABELS), ("xlm-roberta", "XLMRobertaForMaskedLM", {})])
def test_roberta_exports_as_bert_computing_the_same_scores(family: str, class_name: str, overrides: dict,
                                                           spm: Tokenizer, tmp_path: Path) -> None:
    """RoBERTa's layers are BERT's; only its positions start at the padding id + 1, which the import slices."""
    hf = encoder_folder(family, class_name, overrides, spm, tmp_path / "hf")
    _import(tmp_path / "hf", tmp_path / "run")
    result = CliRunner().invoke(app, ["export", str(tmp_path / "run"), "-o", str(tmp_path / "out"), "--to", "hf",
                                      "--check", "none"])
    assert result.exit_code == 0, result.output
    cls = class_name.replace("XLMRoberta", "Bert").replace("Roberta", "Bert")
    back = getattr(transformers, cls).from_pretrained(tmp_path / "out").eval()
    ids = _batch()
    with torch.no_grad():
        theirs, ours = (m(input_ids=ids, attention_mask=ids.ne(PAD)).logits for m in (hf, back))
    keep = ids.ne(PAD) if theirs.dim() == 3 else torch.ones(theirs.size(0), dtype=torch.bool)
    assert (theirs - ours)[keep].abs().max().item() < 1e-4
