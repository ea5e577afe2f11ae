"""A Hugging Face folder's special ids as the run's record (``Specials``): the folder's own ids, nothing moved.

Which token is which role: ``config.json``'s ``pad_token_id``, ``bos_token_id`` and ``eos_token_id`` where given,
else the tokenizer's own files (``special_tokens_map.json``, ``tokenizer_config.json``: pad, unk, bos or cls, eos
or sep), else the usual special token of the tokenizer's (<pad>, <unk>, <s>, </s>; [PAD], [UNK], [CLS],
[SEP]). A role may share a token (GPT-2's <|endoftext|> is its bos, eos and unk) or have none (GPT-2 has no
pad); only a missing EOS is refused (decoders stop at it).

What is added around a sequence: ``source``, the tokenizer's own adding (a tokenizer.json's post-processor;
beside a sentencepiece model, tokenizer_config.json's ``add_bos_token`` and ``add_eos_token``; a translator's
tokenizer appends ``</s>``); ``target``, a decoder's row, from config.json's ``decoder_start_token_id`` (Marian's
pad, M2M100's eos) where it has one, else from bos (eos where the vocabulary has no bos)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tbuild.components.specs.special import ROLES, TEXT, Specials

from .folder import UnsupportedImport, read_json

Note = Callable[[str], None]  # a line for the import's report
NAMES = {"pad": ("pad_token",), "unk": ("unk_token",), "bos": ("bos_token", "cls_token"),
         "eos": ("eos_token", "sep_token")}  # where the tokenizer's files name each role's token
USUAL = {"pad": ("<pad>", "[PAD]"), "unk": ("<unk>", "[UNK]"), "bos": ("<s>", "[CLS]"),
         "eos": ("</s>", "[SEP]")}  # each role's usual special token, where nothing names one (roberta-base's folder)


def optional_json(path: Path) -> dict:
    """``path`` as a JSON object, or {} where the folder has no such file."""
    return read_json(path) if path.is_file() else {}


def _named(folder: Path) -> dict[str, str]:
    """Each role's token as the tokenizer's files name it (special_tokens_map.json first)."""
    files = [optional_json(folder / "special_tokens_map.json"), optional_json(folder / "tokenizer_config.json")]
    named = {}
    for role, keys in NAMES.items():
        for value in (f.get(k) for k in keys for f in files):
            value = value.get("content") if isinstance(value, dict) else value
            if isinstance(value, str):
                named[role] = value
                break
    return named


def role_ids(folder: Path, config: dict, token_to_id: dict[str, int], specials: set[int],
             unk: int | None) -> dict[str, int | None]:
    """The folder's id of each role (``specials``: the ids of the tokenizer's special tokens; ``unk``: its
    model's own unknown id, if any), None for a role it has no token for; a refusal where there is no EOS."""
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


def _role(token: object, ids: dict[str, int | None], token_to_id: dict[str, int], after: bool) -> str:
    """The role of a token a post-processor adds ``after`` the text or before it: of roles sharing its id
    (opus-mt's ``</s>`` is bos and eos), eos after the text, bos before it, else the first."""
    name = token[0] if isinstance(token, list) and token else token
    found = token_to_id.get(name, -1) if isinstance(name, str) else -1
    roles = [role for role, i in ids.items() if i is not None and i == found]
    role = next((r for r in roles if r == ("eos" if after else "bos")), roles[0] if roles else None)
    if role is None:
        raise UnsupportedImport(f"tokenizer.json post_processor adds {name!r}, which is none of the "
                                f"vocabulary's roles ({', '.join(r for r, i in ids.items() if i is not None)})")
    return role


def processor_template(processor: dict | None, ids: dict[str, int | None],
                        token_to_id: dict[str, int]) -> tuple[str, ...] | None:
    """A tokenizer.json post-processor's adding to one sequence as role names around text (None: it adds
    nothing, as ByteLevel's; a token that is no role's, or another kind: refused)."""
    if not isinstance(processor, dict):
        return None
    kind = processor.get("type")
    if kind == "Sequence":
        found = [processor_template(p, ids, token_to_id) for p in processor.get("processors") or []]
        return next((f for f in found if f is not None), None)
    if kind in ("BertProcessing", "RobertaProcessing"):  # [CLS] … [SEP]: cls and sep as [text, id]
        return (_role(processor.get("cls"), ids, token_to_id, False), TEXT,
                _role(processor.get("sep"), ids, token_to_id, True))
    if kind == "ByteLevel":  # offsets only
        return None
    if kind != "TemplateProcessing":
        raise UnsupportedImport(f"tokenizer.json post_processor {kind!r}: tbuild reads TemplateProcessing, "
                                "BertProcessing, RobertaProcessing, ByteLevel and a Sequence of them")
    parts: list[str] = []
    for piece in processor.get("single") or []:
        parts.append(TEXT if "Sequence" in piece else
                     _role(piece.get("SpecialToken", {}).get("id"), ids, token_to_id, TEXT in parts))
    return tuple(parts) if TEXT in parts else None


def source_template(folder: Path, ids: dict[str, int | None], token_to_id: dict[str, int], processor: dict | None,
                    translator: bool, *, published: bool = False, note: Note = lambda _: None) -> tuple[str, ...]:
    """What the folder's tokenizer adds around an input sequence (module docstring). ``published``: the folder's
    own tokenizer.json, whose post-processor alone decides, as transformers reads it (``note`` says so)."""
    found = processor_template(processor, ids, token_to_id)
    config = optional_json(folder / "tokenizer_config.json")
    flags = [f for f in ("add_bos_token", "add_eos_token") if f in config]
    if published and flags:
        note(f"tokenizer_config.json {', '.join(f'{f} {config[f]}' for f in flags)}: not applied; tokenizer.json's "
             f"post-processor decides what is added ({' '.join(found or (TEXT,))}), as transformers reads it")
    if found is not None:
        return found
    if translator:  # MarianTokenizer, PegasusTokenizer, M2M100Tokenizer: the source then </s>
        return (TEXT, "eos")
    if published:
        return (TEXT,)
    before = ("bos",) if config.get("add_bos_token") and ids["bos"] is not None else ()
    after = ("eos",) if config.get("add_eos_token") else ()
    return (*before, TEXT, *after)


def specials(ids: dict[str, int | None], config: dict, source: tuple[str, ...]) -> Specials:
    """The record: the roles' ids, ``source``, and the decoder's start (config.json's decoder_start_token_id,
    which must be a role's id; else bos, else eos)."""
    start = config.get("decoder_start_token_id")
    if isinstance(start, int):
        role = next((r for r in ("bos", "pad", "eos", "unk") if ids[r] == start), None)
        if role is None:
            raise UnsupportedImport(f"config.json decoder_start_token_id {start}: none of the vocabulary's roles "
                                    f"({', '.join(f'{r} {i}' for r, i in ids.items() if i is not None)})")
    else:
        role = "bos" if ids["bos"] is not None else "eos"
    return Specials(**ids, source=source, target=(role, TEXT, "eos"))
