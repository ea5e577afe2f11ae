"""A published opus-mt folder's tokenizer (MarianTokenizer's files as Helsinki-NLP ships them) as one tokenizers
file in tbuild's ids, and the renumbering of the model's vocabulary rows.

Such a folder holds two sentencepiece models (source.spm encodes the input, target.spm wrote the training
targets) and vocab.json, the model's rows: piece -> row for the pieces of both, ``</s>`` 0, ``<unk>`` 1 and
``<pad>`` last, where the decoder also starts (``decoder_start_token_id`` = ``pad_token_id``). MarianTokenizer
encodes with source.spm and looks each piece up in vocab.json (a piece missing there is ``<unk>``); decoding
joins the target pieces. The file written here does the same with one Unigram model over vocab.json's pieces:
source.spm's pieces with their scores, every other piece (the target's) never chosen, source.spm's
normalization (its character map, whitespace rules and word-boundary prefix), and the language tokens
(``>>fr<<``) matched whole. MarianTokenizer's optional Moses punctuation normalization (with sacremoses
installed) is not applied.

tbuild's ids are PAD 0, UNK 1, BOS 2, EOS 3, each its own row. A role that shares a row in the folder (the
decoder's start is its PAD) gets a row of its own, a copy that the model never scores (``model.silent_ids``):
the model computes what it computed, log-probabilities included."""

from __future__ import annotations

import json
from pathlib import Path

from ..data.tokenizer import Tokenizer
from ..data.tokenizers_file import NAME as TOKENIZERS
from ..errors import DataError
from ..extras import require
from .hf_ids import ROLES, Renumbering, renumbering
from .hf_source import UnsupportedImport, read_spm

NORMAL, USER_DEFINED = 1, 4  # sentencepiece's ModelProto.SentencePiece.Type
NEVER = -1e9  # a piece's score that no segmentation prefers, below an unknown character's (min score - 10)


def _json(path: Path) -> dict:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UnsupportedImport(f"{path}: not readable JSON ({e})") from None
    if not isinstance(found, dict):
        raise UnsupportedImport(f"{path}: not a JSON object of piece -> id")
    return found


def _vocabulary(path: Path) -> list[str]:
    """vocab.json's pieces by row (every row 0 to n-1 named once)."""
    ids = _json(path)
    rows = sorted(ids.values()) if all(isinstance(i, int) for i in ids.values()) else None
    if rows != list(range(len(ids))):
        raise UnsupportedImport(f"{path}: its ids are not the rows 0 to {len(ids) - 1}, each once")
    by_row = {i: p for p, i in ids.items()}
    return [by_row[i] for i in range(len(ids))]


def roles(config: dict, pieces: list[str]) -> dict[str, int]:
    """Each role's row in the folder: config.json's pad, eos and decoder start (BOS), vocab.json's ``<unk>``;
    PAD, UNK and EOS distinct (BOS may share PAD's or EOS's row)."""
    row = {p: i for i, p in enumerate(pieces)}
    found = {"pad": config.get("pad_token_id", row.get("<pad>")), "unk": row.get("<unk>"),
             "eos": config.get("eos_token_id", row.get("</s>"))}
    found["bos"] = config.get("decoder_start_token_id", found["pad"])
    for role, i in found.items():
        if not isinstance(i, int) or not 0 <= i < len(pieces):
            field = "vocab.json <unk>" if role == "unk" else f"config.json {role}_token_id"
            raise UnsupportedImport(f"{field} {i!r}: not a row of vocab.json ({len(pieces)} pieces)")
    if len({found["pad"], found["unk"], found["eos"]}) < 3:
        raise UnsupportedImport(f"config.json pad_token_id {found['pad']}, eos_token_id {found['eos']} and <unk> "
                                f"{found['unk']}: tbuild's PAD, UNK and EOS are three different tokens")
    return found


def _names(numbering: Renumbering, pieces: list[str]) -> list[str]:
    """Each tbuild row's token: the folder's piece, or a copied role's own (``Renumbering.copy_names``)."""
    names = [pieces[i] for i in numbering.order]
    for new, name in numbering.copy_names(set(pieces)).items():
        names[new] = name
    return names


def _normalizer(tokenizers, spec) -> object:  # noqa: ANN001 - the tokenizers module, a NormalizerSpec
    """sentencepiece's normalization as tokenizers runs it: the character map, then its whitespace rules."""
    steps = [tokenizers.normalizers.Precompiled(spec.precompiled_charsmap)] if spec.precompiled_charsmap else []
    if spec.remove_extra_whitespaces:
        steps += [tokenizers.normalizers.Replace(tokenizers.Regex(r"\A +| +\z"), ""),
                  tokenizers.normalizers.Replace(tokenizers.Regex(" {2,}"), " ")]
    return tokenizers.normalizers.Sequence(steps)


def _file(proto, names: list[str], path: Path) -> None:  # noqa: ANN001 - source.spm's ModelProto
    """The tokenizers file: a Unigram over ``names`` scored as source.spm scores them."""
    tokenizers = require("tokenizers", "tbuild[export]", "an opus-mt tokenizer")
    scores = {p.piece: p.score for p in proto.pieces if p.type in (NORMAL, USER_DEFINED)}
    special = set(range(len(ROLES)))
    vocab = [(name, NEVER if i in special else scores.get(name, NEVER)) for i, name in enumerate(names)]
    tk = tokenizers.Tokenizer(tokenizers.models.Unigram(vocab, unk_id=ROLES.index("unk"), byte_fallback=False))
    tk.normalizer = _normalizer(tokenizers, proto.normalizer_spec)
    prefix = "always" if proto.normalizer_spec.add_dummy_prefix else "never"
    tk.pre_tokenizer = tokenizers.pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=prefix, split=False)
    tk.decoder = tokenizers.decoders.Metaspace(replacement="▁", prepend_scheme=prefix, split=False)
    tk.add_special_tokens([tokenizers.AddedToken(names[i], special=True, normalized=False) for i in special])
    codes = [n for n in names if n.startswith(">>") and n.endswith("<<")]  # MarianTokenizer's language codes
    tk.add_tokens([tokenizers.AddedToken(c, special=False, normalized=False) for c in codes])
    tk.save(str(path))


def opus_tokenizer(folder: Path, config: dict, scratch: Path) -> tuple[Tokenizer, Renumbering]:
    """The folder's source.spm and vocab.json as a tokenizers file in ``scratch`` with tbuild's ids, and the
    renumbering of the model's vocabulary rows (a refusal naming the file or field where they do not fit)."""
    tok_config = _json(folder / "tokenizer_config.json") if (folder / "tokenizer_config.json").is_file() else {}
    if tok_config.get("separate_vocabs") or tok_config.get("target_vocab_file"):
        raise UnsupportedImport(f"{folder / 'tokenizer_config.json'} separate_vocabs: a vocabulary per side; "
                                "tbuild's imported translators share one")
    pieces = _vocabulary(folder / "vocab.json")
    proto = read_spm(folder / "source.spm")
    read_spm(folder / "target.spm")  # read: a corrupt file is named now, not at decode time
    known = set(pieces)
    missing = next((p.piece for p in proto.pieces if p.type == NORMAL and p.piece not in known), None)
    if missing is not None:
        raise UnsupportedImport(f"{folder / 'source.spm'}: piece {missing!r} has no row in vocab.json")
    numbering = renumbering(roles(config, pieces), len(pieces))  # a role sharing a row comes twice
    path = scratch / TOKENIZERS
    _file(proto, _names(numbering, pieces), path)
    try:
        return Tokenizer.load(path), numbering
    except DataError as e:  # pragma: no cover - the file was written just now
        raise UnsupportedImport(str(e)) from None
