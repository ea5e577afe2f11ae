"""The tokenizer of a Hugging Face folder that becomes the imported run's: a sentencepiece model (spm.model), or
where the folder has none, its tokenizers file (tokenizer.json, ``data/tokenizers_file.py``).

tbuild runs one sentencepiece model for source and target, with ids PAD 0, UNK 1, BOS 2, EOS 3, and a piece's
id is its embedding row. A folder qualifies when its model's ids are the model's rows:
- MarianTokenizer's files (what ``tbuild export --to hf`` writes for a translator): source.spm and
  target.spm the same model, and vocab.json giving every piece of it its sentencepiece id;
- tokenizer.model (what the decoder-only and tagger exports write), with tbuild-tokenizer.json where present
  naming the same pieces;
- else tokenizer.json, whose ids 0 to 3 are special tokens (tbuild's PAD, UNK, BOS, EOS).
Anything else (two different models per side, ids remapped by vocab.json, no tokenizer tbuild reads) is
refused in one line naming the file or what is missing.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..data.tokenizer import Tokenizer
from ..errors import DataError
from .hf_source import UnsupportedImport


def _pieces(tok: Tokenizer) -> list[str]:
    return [tok.sp.id_to_piece(i) for i in range(tok.vocab_size)]


def _load(path: Path) -> Tokenizer:
    try:
        return Tokenizer.load(path)
    except DataError as e:
        raise UnsupportedImport(str(e)) from None


def _marian(folder: Path) -> Tokenizer:
    source, target, vocab = (folder / n for n in ("source.spm", "target.spm", "vocab.json"))
    for path in (source, target, vocab):
        if not path.is_file():
            raise UnsupportedImport(f"{path}: missing (MarianTokenizer's files: source.spm, target.spm, vocab.json)")
    if source.read_bytes() != target.read_bytes():
        raise UnsupportedImport(f"{folder}: source.spm and target.spm differ; tbuild runs one sentencepiece "
                                "model for both sides")
    tok = _load(source)
    try:
        ids = json.loads(vocab.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UnsupportedImport(f"{vocab}: not readable JSON ({e})") from None
    wrong = next((p for i, p in enumerate(_pieces(tok)) if not isinstance(ids, dict) or ids.get(p) != i), None)
    if wrong is not None:
        got = ids.get(wrong) if isinstance(ids, dict) else None
        raise UnsupportedImport(f"{vocab}: piece {wrong!r} has id {got}, not its sentencepiece id "
                                f"{tok.sp.piece_to_id(wrong)}; tbuild needs the model's rows in sentencepiece order")
    return tok


def _spm(folder: Path) -> Tokenizer:
    tok = _load(folder / "tokenizer.model")
    named = folder / "tbuild-tokenizer.json"
    if named.is_file():
        try:
            vocabulary = json.loads(named.read_text(encoding="utf-8"))["vocabulary"]
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as e:
            raise UnsupportedImport(f"{named}: not readable ({e})") from None
        if vocabulary[: tok.vocab_size] != _pieces(tok):
            raise UnsupportedImport(f"{named}: its vocabulary is not tokenizer.model's pieces in id order")
    return tok


def find_tokenizer(folder: Path, rows: int) -> Tokenizer:
    """The folder's sentencepiece model or tokenizers file with tbuild's ids (the refusal otherwise); the
    model's ``rows`` (its smallest vocabulary table) hold every piece."""
    if (folder / "source.spm").exists() or (folder / "target.spm").exists():
        tok = _marian(folder)
    elif (folder / "tokenizer.model").exists():
        tok = _spm(folder)
    elif (folder / "tokenizer.json").exists():
        tok = _load(folder / "tokenizer.json")  # a tokenizers file (GPT-2's byte-level BPE, Llama 3's)
    else:
        other = next((n for n in ("spiece.model", "merges.txt", "vocab.txt") if (folder / n).exists()), None)
        has = f" (it has {other}, which tbuild does not run)" if other else ""
        raise UnsupportedImport(f"{folder}: no tokenizer (source.spm/target.spm, tokenizer.model or "
                                f"tokenizer.json){has}")
    if tok.vocab_size > rows:
        raise UnsupportedImport(f"{tok.path}: {tok.vocab_size} pieces but the model has {rows} vocabulary rows")
    return tok
