"""A published opus-mt folder's tokenizer (MarianTokenizer's files as Helsinki-NLP ships them) as one tokenizers
file in tbuild's ids, and the renumbering of the model's vocabulary rows.

Such a folder holds two sentencepiece models (source.spm encodes the input, target.spm wrote the training
targets) and vocab.json, the model's rows: piece -> row for the pieces of both, ``</s>`` 0, ``<unk>`` 1 and
``<pad>`` last, where the decoder also starts (``decoder_start_token_id`` = ``pad_token_id``). MarianTokenizer
encodes with source.spm and looks each piece up in vocab.json (a piece missing there is ``<unk>``); decoding
joins the target pieces. The file written here does the same with one model over vocab.json's pieces
(``spm_vocab.py``): source.spm's pieces as it scores them, every other piece (the target's) never chosen,
source.spm's normalization, and the language tokens (``>>fr<<``) matched whole and kept in decoded text.
MarianTokenizer's optional Moses punctuation normalization (with sacremoses installed) is not applied.

A role that shares a row in the folder (the decoder's start is its PAD) gets a row of its own, a copy that the
model never scores (``model.silent_ids``): the model computes what it computed, log-probabilities included."""

from __future__ import annotations

from pathlib import Path

from ..data.tokenizer import Tokenizer
from .hf_ids import Renumbering
from .hf_source import UnsupportedImport, read_json, read_spm
from .spm_vocab import Codes, vocab_tokenizer, vocabulary


def opus_tokenizer(folder: Path, config: dict, scratch: Path) -> tuple[Tokenizer, Renumbering]:
    """The folder's source.spm and vocab.json as a tokenizers file in ``scratch`` with tbuild's ids, and the
    renumbering of the model's vocabulary rows (a refusal naming the file or field where they do not fit)."""
    tok_config = read_json(folder / "tokenizer_config.json") if (folder / "tokenizer_config.json").is_file() else {}
    if tok_config.get("separate_vocabs") or tok_config.get("target_vocab_file"):
        raise UnsupportedImport(f"{folder / 'tokenizer_config.json'} separate_vocabs: a vocabulary per side; "
                                "tbuild's imported translators share one")
    pieces = vocabulary(folder / "vocab.json")
    proto = read_spm(folder / "source.spm")
    read_spm(folder / "target.spm")  # read: a corrupt file is named now, not at decode time
    codes = Codes(tuple(p for p in pieces if p.startswith(">>") and p.endswith("<<")))  # MarianTokenizer's
    return vocab_tokenizer(proto, folder / "source.spm", pieces, config, codes, scratch)
