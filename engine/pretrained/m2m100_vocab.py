"""An M2M100 folder's own tokenizer (M2M100Tokenizer's files, as facebook/m2m100_418M ships them) as one
tokenizers file in tbuild's ids, and the renumbering of the model's vocabulary rows.

Such a folder holds sentencepiece.bpe.model (it encodes text to pieces), vocab.json (piece -> the model's row in
fairseq's numbering: ``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3, then the pieces; a piece missing there is
``<unk>``), and tokenizer_config.json, whose ``language_codes`` (``m2m100``: 100 languages, ``wmt21``: 8) name
the language tokens ``__en__``, ``__fr__``, … that M2M100Tokenizer numbers after vocab.json's rows (the
language's index in transformers' list plus vocab.json's size). The source is ``__src__ pieces </s>``; the
decoder starts from ``</s>`` and generation forces the target's language token first.

The file written here (``spm_vocab.py``) encodes as M2M100Tokenizer does, with the language tokens matched
whole and left out of decoded text (special, as NLLB's codes are): write the source's at the start of a line
and give the target's as the target prefix. tbuild's BOS is a copy of ``</s>``'s row, never scored, and
``<s>`` an ordinary row after the four roles."""

from __future__ import annotations

from pathlib import Path

from ..data.tokenizer import Tokenizer
from .hf_ids import Renumbering
from .hf_source import UnsupportedImport, read_json, read_spm
from .spm_vocab import Codes, vocab_tokenizer, vocabulary

FILES = ("sentencepiece.bpe.model", "vocab.json")  # M2M100Tokenizer's own (tokenizer_config.json: optional)


def language_tokens(folder: Path) -> tuple[str, ...]:
    """The language tokens M2M100Tokenizer appends after vocab.json's rows, in their order: those of
    tokenizer_config.json's ``language_codes`` (``m2m100`` where it has none)."""
    from transformers.models.m2m_100.tokenization_m2m_100 import FAIRSEQ_LANGUAGE_CODES

    path = folder / "tokenizer_config.json"
    name = read_json(path).get("language_codes", "m2m100") if path.is_file() else "m2m100"
    if name not in FAIRSEQ_LANGUAGE_CODES:
        raise UnsupportedImport(f"{path} language_codes {name!r}: M2M100Tokenizer knows "
                                f"{', '.join(FAIRSEQ_LANGUAGE_CODES)}")
    return tuple(f"__{code}__" for code in FAIRSEQ_LANGUAGE_CODES[name])


def m2m100_tokenizer(folder: Path, config: dict, scratch: Path) -> tuple[Tokenizer, Renumbering]:
    """The folder's sentencepiece.bpe.model, vocab.json and language tokens as a tokenizers file in ``scratch``
    with tbuild's ids, and the renumbering of the model's vocabulary rows (a refusal naming the file or field
    where they do not fit)."""
    spm_path, vocab_path = (folder / name for name in FILES)
    for path in (spm_path, vocab_path):
        if not path.is_file():
            raise UnsupportedImport(f"{path}: missing (M2M100Tokenizer's files: {', '.join(FILES)})")
    pieces = vocabulary(vocab_path)
    proto = read_spm(spm_path)
    codes = language_tokens(folder)
    known = set(pieces)
    taken = next((c for c in codes if c in known), None)
    if taken is not None:
        raise UnsupportedImport(f"{vocab_path}: has the language token {taken!r}, which M2M100Tokenizer numbers "
                                "after vocab.json's rows")
    return vocab_tokenizer(proto, spm_path, [*pieces, *codes], config, Codes(codes, special=True), scratch)
