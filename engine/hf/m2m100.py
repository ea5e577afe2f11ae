"""M2M100 (``M2M100ForConditionalGeneration``, NLLB's class; imported, not an export target): Pegasus's pre-norm
layers and names (``bart.layers``) with a sinusoid computed on load (tensor2tensor's frequencies, sin half then
cos half) counted from the padding id + 1, which §3.5's table is not: its rows from there become the
``learned`` table, exactly. One token table, shared by both stacks.

Its own tokenizer (M2M100Tokenizer's files): sentencepiece.bpe.model, vocab.json (piece -> the model's row) and
the language tokens ``__en__``, ``__fr__``, … of tokenizer_config.json's ``language_codes``, numbered after
vocab.json's rows, become one tokenizers file in those ids (``vocab.py``), the language tokens matched whole and
left out of decoded text: write the source's at the start of a line and give the target's as the target prefix.
The decoder starts from ``</s>`` (the record's target template starts with eos)."""

from __future__ import annotations

from pathlib import Path

from torch import nn

from . import bart
from .family import Family
from .folder import UnsupportedImport, read_json, read_spm
from .maps import State
from .vocab import Codes, vocab_tokenizer, vocabulary

FILES = ("sentencepiece.bpe.model", "vocab.json")  # M2M100Tokenizer's own (tokenizer_config.json: optional)


def fields(hf: nn.Module) -> tuple[dict, State]:
    """The spec's fields and the learned tables: each stack's sinusoid rows from the padding id + 1."""
    rows = hf.config.max_position_embeddings
    tables = {}
    for embed, stack in (("src_embed", "encoder"), ("tgt_embed", "decoder")):
        positions = getattr(hf.model, stack).embed_positions
        start = positions.padding_idx + 1
        tables[f"{embed}.positional.embedding.weight"] = positions.weights.detach().float()[start:start + rows].clone()
    return bart.fields(hf, pre_norm=True, positional={"kind": "learned"}, shared=True), tables


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


def m2m100_tokenizer(folder: Path, special: set[int], out: Path) -> Path:
    """The folder's sentencepiece.bpe.model, vocab.json and language tokens as a tokenizers file at ``out`` in
    their ids (``special``: the rows of the folder's special tokens); a refusal naming the file or field where
    they do not fit."""
    spm_path, vocab_path = (folder / name for name in FILES)
    for path in (spm_path, vocab_path):
        if not path.is_file():
            raise UnsupportedImport(f"{path}: missing (M2M100Tokenizer's files: {', '.join(FILES)})")
    pieces, proto, codes = vocabulary(vocab_path), read_spm(spm_path), language_tokens(folder)
    taken = next((c for c in codes if c in set(pieces)), None)
    if taken is not None:
        raise UnsupportedImport(f"{vocab_path}: has the language token {taken!r}, which M2M100Tokenizer numbers "
                                "after vocab.json's rows")
    return vocab_tokenizer(proto, spm_path, [*pieces, *codes], special, Codes(codes, special=True), out)


M2M100 = Family(model_types=("m2m_100",), hf_class=lambda _c: "M2M100ForConditionalGeneration",
                check=bart.check_config, fields=fields, names=bart.prenorm_names)
