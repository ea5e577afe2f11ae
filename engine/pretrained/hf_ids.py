"""Published tokenizers number their special tokens their own way (BERT: [PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102;
RoBERTa and XLM-R: <s> 0, <pad> 1, </s> 2, <unk> 3); tbuild's ids are PAD 0, UNK 1, BOS 2, EOS 3. An import
renumbers such a model: the four special tokens move to 0-3 and every other token keeps its order after them. The
tokenizers file is rewritten with the new ids (its vocabulary, added tokens, post-processor and padding) and every
vocabulary row of the weights moves alike (``Renumbering.rows``), so the model computes what it computed.

Which token is which: ``config.json``'s ``pad_token_id``, ``bos_token_id`` and ``eos_token_id`` where given, else
the tokenizer's own files (``special_tokens_map.json``, ``tokenizer_config.json``: pad, unk, bos or cls, eos or
sep), else the usual special token of the tokenizer's (<pad>, <unk>, <s>, </s>; [PAD], [UNK], [CLS], [SEP]).
A role with no token of its own (GPT-2 has only <|endoftext|>, for BOS, EOS and UNK) gets a copy of a row that
the model never scores (``Renumbering.copies``, ``model.silent_ids``); only a missing EOS is refused."""

from __future__ import annotations

import json
from collections.abc import Container
from dataclasses import dataclass
from pathlib import Path

import torch

from .hf_source import UnsupportedImport

ROLES = ("pad", "unk", "bos", "eos")  # tbuild's ids 0 to 3
NAMES = {"pad": ("pad_token",), "unk": ("unk_token",), "bos": ("bos_token", "cls_token"),
         "eos": ("eos_token", "sep_token")}  # where the tokenizer's files name each role's token
USUAL = {"pad": ("<pad>", "[PAD]"), "unk": ("<unk>", "[UNK]"), "bos": ("<s>", "[CLS]"),
         "eos": ("</s>", "[SEP]")}  # each role's usual special token, where nothing names one (roberta-base's folder)


@dataclass(frozen=True)
class Renumbering:
    """``order[new] = old``: tbuild's id ``new`` is the source's id ``order[new]``. An id may come twice: a role
    with no token of its own in the source (GPT-2 has no PAD or UNK, and its BOS is its EOS; opus-mt's decoder
    starts from PAD) gets a copy of a row, at the new ids ``copies``, which the model never scores
    (``model.silent_ids``): its output computes the source's softmax."""

    order: tuple[int, ...]
    copies: frozenset[int] = frozenset()

    @property
    def added(self) -> int:
        """How many rows tbuild has beyond the source's: the copies."""
        return len(self.copies)

    def rows(self, table: torch.Tensor) -> torch.Tensor:
        """``table``'s rows in tbuild's order (rows past the tokenizer's, padding a table, stay after them)."""
        tail = torch.arange(len(self.order) - self.added, table.size(0))
        return table[torch.cat([torch.tensor(self.order), tail])]

    def new_ids(self) -> dict[int, int]:
        """The source's id -> tbuild's (where its token is, not a copy's)."""
        return {old: new for new, old in enumerate(self.order) if new not in self.copies}

    def kept(self) -> tuple[int, ...]:
        """tbuild's id of each source id in the source's order (``order`` inverted, the copies left out): the
        rows an export without the copies keeps."""
        new = self.new_ids()
        return tuple(new[old] for old in range(len(new)))

    def inverse(self) -> Renumbering:
        """tbuild's ids back to the source's, the copies left out (``renumbered_file`` drops their tokens)."""
        return Renumbering(self.kept())

    def copy_names(self, taken: Container[str]) -> dict[int, str]:
        """Each copy's token (its new id: a role's): the role's usual one (``<pad>``, ``<unk>``, ``<s>``), or that
        with ``_tbuild`` where ``taken`` (the source's tokens) has it."""
        names = {new: USUAL[ROLES[new]][0] for new in sorted(self.copies)}
        return {new: name if name not in taken else f"{name}_tbuild" for new, name in names.items()}


def _read(path: Path) -> dict:
    try:
        found = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UnsupportedImport(f"{path}: not readable JSON ({e})") from None
    return found if isinstance(found, dict) else {}


def _named(folder: Path) -> dict[str, str]:
    """Each role's token as the tokenizer's files name it (special_tokens_map.json first)."""
    files = [_read(folder / "special_tokens_map.json"), _read(folder / "tokenizer_config.json")]
    named = {}
    for role, keys in NAMES.items():
        for value in (f.get(k) for k in keys for f in files):
            value = value.get("content") if isinstance(value, dict) else value
            if isinstance(value, str):
                named[role] = value
                break
    return named


def special_ids(folder: Path, config: dict, token_to_id: dict[str, int], specials: set[int],
                unk: int | None) -> dict[str, int | None]:
    """The source's id of each role (``ROLES``; ``specials``: the ids of the tokenizer's special tokens; ``unk``:
    its model's own unknown id, if any), None for a role it has no token for (GPT-2 has no PAD); a refusal
    where there is no EOS."""
    named, ids = _named(folder), {}
    config = config | ({"unk_token_id": unk} if unk is not None and "unk_token_id" not in config else {})
    for role in ROLES:
        given = config.get(f"{role}_token_id")
        if isinstance(given, int) and given not in specials and given != unk:
            raise UnsupportedImport(f"config.json {role}_token_id {given}: not one of the tokenizer's special tokens "
                                    f"(ids {sorted(specials)[:8]})")
        if isinstance(given, int):
            ids[role] = given
        elif role in named and named[role] in token_to_id:
            ids[role] = token_to_id[named[role]]
        elif any(token_to_id.get(usual) in specials for usual in USUAL[role]):
            ids[role] = next(token_to_id[u] for u in USUAL[role] if token_to_id.get(u) in specials)
        elif role == "eos":
            raise UnsupportedImport("config.json eos_token_id: not set, and the tokenizer's files name no eos "
                                    "token; tbuild's decoders stop at EOS")
        else:
            ids[role] = None
    return ids


KEEPS = ("eos", "pad", "unk", "bos")  # which role keeps a token that several share; the others get copies


def renumbering(ids: dict[str, int | None], size: int) -> Renumbering:
    """The four special ids first, in tbuild's order, then every other id of ``size`` in its order. A role with
    no token of its own (None, or one that a role before it in ``KEEPS`` has) gets a copy of that token's row,
    or of EOS's row."""
    kept: dict[str, int] = {}
    for role in KEEPS:
        i = ids[role]
        if i is not None and i not in kept.values():
            kept[role] = i
    first = [kept.get(role, ids[role] if ids[role] is not None else ids["eos"]) for role in ROLES]
    copies = frozenset(new for new, role in enumerate(ROLES) if role not in kept)
    return Renumbering(tuple(first + [i for i in range(size) if i not in first]), copies)


def renumbered_file(data: dict, numbering: Renumbering) -> dict:
    """A tokenizers file's JSON with every id ``old`` written as ``numbering.new_ids()[old]`` (an id it has
    none for, a copy's on export (``Renumbering.inverse``), left out with its token), and each copy's token
    (``Renumbering.copy_names``) added as a special token at its id."""
    model, new = data["model"], numbering.new_ids()
    added = [t for t in data.get("added_tokens") or [] if t["id"] in new]
    vocab = model.get("vocab")
    known = set(vocab) if isinstance(vocab, dict) else {e[0] for e in vocab or []}
    copies = numbering.copy_names(known | {t["content"] for t in added})
    # an added token outside the model's vocabulary (GPT-2's <|endoftext|> may be) joins it at its new id: the
    # library numbers added tokens after the vocabulary, which its new id may not be
    outside = {new[t["id"]]: t["content"] for t in added if t["content"] not in known} | copies
    if isinstance(vocab, dict):  # WordPiece, BPE, WordLevel: piece -> id
        entries = [(p, new[i]) for p, i in vocab.items() if i in new] + [(name, i) for i, name in outside.items()]
        model["vocab"] = dict(sorted(entries, key=lambda e: e[1]))
    elif isinstance(vocab, list):  # Unigram: [piece, score] in id order
        by_new = {new[i]: entry for i, entry in enumerate(vocab) if i in new}
        by_new |= {i: [name, 0.0] for i, name in outside.items()}
        model["vocab"] = [by_new[i] for i in range(len(by_new))]
        if model.get("unk_id") is not None:
            model["unk_id"] = new[model["unk_id"]]
    for token in added:
        token["id"] = new[token["id"]]
    added += [{"id": i, "content": name, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
               "special": True} for i, name in copies.items()]
    data["added_tokens"] = sorted(added, key=lambda t: t["id"])
    _processor(data.get("post_processor"), new)
    if isinstance(data.get("padding"), dict) and "pad_id" in data["padding"]:
        data["padding"]["pad_id"] = new[data["padding"]["pad_id"]]
    return data


def _processor(processor: dict | None, new: dict[int, int]) -> None:
    """The post-processor's special-token ids (TemplateProcessing's, BertProcessing's and RobertaProcessing's
    [token, id] pairs, a Sequence's processors)."""
    if not isinstance(processor, dict):
        return
    for part in processor.get("processors") or []:
        _processor(part, new)
    for key in ("sep", "cls"):
        if isinstance(processor.get(key), list) and len(processor[key]) == 2:
            processor[key][1] = new[processor[key][1]]
    for special in (processor.get("special_tokens") or {}).values():
        special["ids"] = [new[i] for i in special.get("ids", [])]
