"""A headless encoder's sentence vectors as the folder says to pool them: the ``sentence_embedding`` head
(``components/specs/head.py``) of a ``BertModel``, ``RobertaModel`` or ``XLMRobertaModel`` import.

A sentence-transformers folder (as ``SentenceTransformer.save`` writes it) lists its modules in ``modules.json``:
the ``Transformer`` at the folder's root, a ``Pooling`` (one ``pooling_mode_*`` key), optionally a ``Normalize``;
``sentence_bert_config.json`` holds ``max_seq_length`` and ``do_lower_case``. A folder without ``modules.json``
pools by the mean, as sentence-transformers does when it loads a plain transformers model."""

from __future__ import annotations

import json
from pathlib import Path

from .folder import UnsupportedImport, read_json
from .special import optional_json

MODULES = "sentence_transformers.models."
POOLING = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}  # Pooling's keys tbuild takes
OTHER_POOLING = ("pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
                 "pooling_mode_lasttoken")


def _modules(path: Path) -> list[tuple[str, str]]:
    """modules.json's (type without the package, path) pairs, in order; another layout: one line naming it."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UnsupportedImport(f"{path}: not readable JSON ({e})") from None
    if not isinstance(found, list) or not all(isinstance(m, dict) and isinstance(m.get("type"), str)
                                              for m in found):
        raise UnsupportedImport(f"{path}: not a list of modules with their type (sentence-transformers' layout)")
    return [(m["type"].removeprefix(MODULES), str(m.get("path", ""))) for m in found]


def _pooling(path: Path, d_model: int) -> str:
    """The one pooling mode of a Pooling module's config.json: ``mean`` or ``cls``."""
    config = read_json(path)
    modes = [key for key in (*POOLING, *OTHER_POOLING) if config.get(key)]
    if len(modes) != 1 or modes[0] not in POOLING:
        raise UnsupportedImport(f"{path}: pooling {', '.join(modes) or 'none'}: tbuild pools by one of "
                                f"{', '.join(POOLING)}")
    width = config.get("word_embedding_dimension", d_model)
    if width != d_model:
        raise UnsupportedImport(f"{path}: word_embedding_dimension {width} is not the model's hidden_size {d_model}")
    return POOLING[modes[0]]


def sentence_head(folder: Path, d_model: int, positions: int) -> dict:
    """The ``sentence_embedding`` head's fields for the headless encoder in ``folder`` (``d_model`` wide,
    ``positions`` position rows): the pooling, the normalization and the input limit its files give."""
    listed = folder / "modules.json"
    if not listed.is_file():
        return {"kind": "sentence_embedding", "pooling": "mean"}  # sentence-transformers' default for a plain model
    modules = _modules(listed)
    kinds = [kind for kind, _ in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]) or modules[0][1] not in (
            "", "."):
        shown = ", ".join(f"{kind} at {path or '.'}" for kind, path in modules)
        raise UnsupportedImport(f"{listed}: modules {shown}: tbuild imports a Transformer at the folder's root, "
                                "then a Pooling, then optionally a Normalize")
    config = optional_json(folder / "sentence_bert_config.json")
    if config.get("do_lower_case"):
        raise UnsupportedImport(f"{folder / 'sentence_bert_config.json'}: do_lower_case true: tbuild encodes text as "
                                "the tokenizer does, without lowercasing it first")
    limit = config.get("max_seq_length")
    head = {"kind": "sentence_embedding", "pooling": _pooling(folder / modules[1][1] / "config.json", d_model),
            "normalize": len(modules) == 3}
    if isinstance(limit, int) and limit < positions:
        head["max_length"] = limit
    return head
