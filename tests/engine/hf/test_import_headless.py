"""Headless encoders (``BertModel``, ``RobertaModel``, ``XLMRobertaModel``, ``XLMRobertaXLModel``) and
sentence-transformers folders import as encoder_only runs with a ``sentence_embedding`` head: the folder's
pooling, normalization and input limit kept in the spec, no head invented, the unused pooler left out. Tiny random
models with published-style tokenizers (BERT's WordPiece, RoBERTa's byte-level BPE), no download; the
sentence-transformers layout is written by hand as ``SentenceTransformer.save`` writes it (modules.json;
``1_Pooling/config.json`` with ``Pooling``'s ``pooling_mode_*`` keys; an empty ``2_Normalize/``;
``sentence_bert_config.json``), since sentence-transformers is not a dependency. What tbuild cannot pool as the
folder does is refused in one line naming the file. ``st_vectors`` is what sentence-transformers computes on such
a folder, written out with transformers and tokenizers (its ``Transformer.tokenize``: truncation to
max_seq_length, padding; its ``Pooling.forward``: the mean over the attention mask or the first token;
``Normalize``: the L2 norm)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tbuild.engine.run.checkpoint import read_checkpoint

from .test_import_encoder import BERT
from .test_import_hf import _import, _loaded, _perturbed, _refused
from .test_imported_runs import byte_level_bpe
from .test_published_ids import BERT_VOCAB, _wordpiece

transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install -e '.[export]')")
tokenizers = pytest.importorskip("tokenizers", reason="tokenizers not installed (pip install -e '.[export]')")

MODULE = "sentence_transformers.models."
POOLING_KEYS = ("pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens",
                "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken")
FOLDERS = {  # name -> (family, pooling, normalize, max_seq_length); pooling None: no sentence-transformers files
    "bert, mean, normalized, max_seq_length 8": ("bert", "mean", True, 8),
    "xlm-roberta, cls": ("xlm-roberta", "cls", False, None),
    "roberta without modules.json": ("roberta", None, False, None),
    "xlm-roberta-xl (pre-norm), mean, normalized": ("xlm-roberta-xl", "mean", True, None),
    "bert without modules.json": ("bert", None, False, None),
}


def _model(family: str, folder: Path) -> torch.nn.Module:
    """A random headless ``family`` encoder with its published tokenizer, saved into ``folder``."""
    folder.mkdir(parents=True)
    torch.manual_seed(0)
    if family == "bert":
        _wordpiece(folder)
        return _saved(transformers.BertModel(transformers.BertConfig(**(BERT | {"vocab_size": len(BERT_VOCAB)}))),
                      folder)
    tk = byte_level_bpe(folder / "tokenizer.json", ["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    tk.post_processor = tokenizers.processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    tk.save(str(folder / "tokenizer.json"))
    config, model = {"roberta": ("RobertaConfig", "RobertaModel"),
                     "xlm-roberta": ("XLMRobertaConfig", "XLMRobertaModel"),
                     "xlm-roberta-xl": ("XLMRobertaXLConfig", "XLMRobertaXLModel")}[family]
    fields = BERT | {"vocab_size": tk.get_vocab_size(), "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
                     "max_position_embeddings": 40, "type_vocab_size": 1}
    return _saved(getattr(transformers, model)(getattr(transformers, config)(**fields)), folder)


def _saved(hf: torch.nn.Module, folder: Path) -> torch.nn.Module:
    hf = _perturbed(hf)
    hf.save_pretrained(folder)
    return hf


def write_sentence_files(folder: Path, pooling: str, normalize: bool, max_seq_length: int | None,
                         width: int) -> None:
    """sentence-transformers' files beside a saved model: modules.json, 1_Pooling/, 2_Normalize/ and
    sentence_bert_config.json."""
    modules = [{"idx": 0, "name": "0", "path": "", "type": MODULE + "Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": MODULE + "Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": MODULE + "Normalize"})
        (folder / "2_Normalize").mkdir()
    (folder / "modules.json").write_text(json.dumps(modules, indent=2))
    (folder / "1_Pooling").mkdir()
    modes = {key: key == {"mean": "pooling_mode_mean_tokens", "cls": "pooling_mode_cls_token"}[pooling]
             for key in POOLING_KEYS}
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": width, **modes,
                                                                  "include_prompt": True}))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_seq_length,
                                                                  "do_lower_case": False}))


def sentence_folder(name: str, folder: Path) -> torch.nn.Module:
    """The folder ``FOLDERS[name]`` describes; its transformers model."""
    family, pooling, normalize, limit = FOLDERS[name]
    hf = _model(family, folder)
    if pooling is not None:
        write_sentence_files(folder, pooling, normalize, limit, hf.config.hidden_size)
    return hf


def st_vectors(folder: Path, lines: list[str]) -> torch.Tensor:
    """What sentence-transformers gives for ``lines`` on ``folder`` (mean pooling without its files)."""
    modules = json.loads((folder / "modules.json").read_text()) if (folder / "modules.json").exists() else []
    kinds = [m["type"].removeprefix(MODULE) for m in modules]
    pooling = json.loads((folder / "1_Pooling" / "config.json").read_text()) if modules else {}
    limit = json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"] if modules else None
    hf = transformers.AutoModel.from_pretrained(folder).eval()
    tk = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    if limit is not None:
        tk.enable_truncation(max_length=limit)
    tk.enable_padding(pad_id=hf.config.pad_token_id)
    encodings = tk.encode_batch(lines)
    ids = torch.tensor([e.ids for e in encodings])
    mask = torch.tensor([e.attention_mask for e in encodings])
    with torch.no_grad():
        states = hf(input_ids=ids, attention_mask=mask).last_hidden_state
    if pooling.get("pooling_mode_cls_token"):
        vectors = states[:, 0]
    else:
        keep = mask.unsqueeze(-1).float()
        vectors = (states * keep).sum(1) / keep.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(vectors, p=2, dim=1) if "Normalize" in kinds else vectors


@pytest.mark.parametrize("name", FOLDERS)
def test_a_headless_encoder_imports_with_the_folder_s_pooling(name: str, tmp_path: Path) -> None:
    family, pooling, normalize, limit = FOLDERS[name]
    hf = sentence_folder(name, tmp_path / "hf")
    assert "encoder_only" in _import(tmp_path / "hf", tmp_path / "run")
    spec, model = _loaded(tmp_path / "run")
    head = spec.model.head
    assert (head.kind, head.pooling, head.normalize, head.max_length) == ("sentence_embedding", pooling or "mean",
                                                                        normalize, limit)
    assert spec.special().source == ("bos", "text", "eos")  # [CLS] … [SEP], <s> … </s>: the post-processor's
    weights, _ = read_checkpoint(tmp_path / "run" / "best.safetensors")
    assert not any(n.startswith("model.head.") for n in weights)  # no head invented, the pooler left out
    ids = torch.tensor([[0, 7, 9, 12, 2], [0, 8, 2, 1, 1]]) if family != "bert" else \
        torch.tensor([[5, 8, 9, 10, 6], [5, 11, 6, 0, 0]])
    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    with torch.no_grad():
        ours, _ = model.encode(ids, pad)
        theirs = hf(input_ids=ids, attention_mask=~pad).last_hidden_state
    assert (ours - theirs)[~pad].abs().max().item() < 1e-5


def _edited(folder: Path, path: str, edit: dict | list) -> None:
    target = folder / path
    found = json.loads(target.read_text())
    target.write_text(json.dumps(found | edit if isinstance(edit, dict) else edit))


TRANSFORMER = {"idx": 0, "name": "0", "path": "", "type": MODULE + "Transformer"}
POOLER = {"idx": 1, "name": "1", "path": "1_Pooling", "type": MODULE + "Pooling"}
REFUSED = {
    "max pooling": ("1_Pooling/config.json", {"pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": True},
                    "1_Pooling/config.json: pooling pooling_mode_max_tokens: tbuild pools by one of"),
    "mean and cls together": ("1_Pooling/config.json", {"pooling_mode_cls_token": True},
                              "pooling pooling_mode_mean_tokens, pooling_mode_cls_token"),
    "another width": ("1_Pooling/config.json", {"word_embedding_dimension": 8},
                      "word_embedding_dimension 8 is not the model's hidden_size 16"),
    "a Dense module": ("modules.json", [TRANSFORMER, POOLER, {"idx": 2, "name": "2", "path": "2_Dense",
                                                              "type": MODULE + "Dense"}], "Dense at 2_Dense"),
    "the model in a subfolder": ("modules.json", [TRANSFORMER | {"path": "0_Transformer"}, POOLER],
                                 "Transformer at 0_Transformer"),
    "not a list": ("modules.json", {"0": TRANSFORMER}, "modules.json: not a list of modules"),
    "lowercasing first": ("sentence_bert_config.json", {"do_lower_case": True}, "do_lower_case true"),
}


@pytest.mark.parametrize(("path", "edit", "expected"), REFUSED.values(), ids=REFUSED)
def test_what_tbuild_cannot_pool_as_the_folder_does_is_refused_in_one_line(path: str, edit: dict | list,
                                                                            expected: str, tmp_path: Path) -> None:
    folder = tmp_path / "hf"
    sentence_folder("bert, mean, normalized, max_seq_length 8", folder)
    if path == "modules.json" and isinstance(edit, dict):
        (folder / path).write_text(json.dumps(edit))
    else:
        _edited(folder, path, edit)
    _refused([str(folder)], tmp_path / "run", expected)
