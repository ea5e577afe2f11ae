"""The tokenizer of a Hugging Face folder that becomes the imported run's: a sentencepiece model (spm.model), or
where the folder has none, its tokenizers file (tokenizer.json, ``data/tokenizers_file.py``).

tbuild runs one sentencepiece model for source and target, with ids PAD 0, UNK 1, BOS 2, EOS 3, and a piece's
id is its embedding row. A folder qualifies when its model's ids are the model's rows:
- MarianTokenizer's files (what ``tbuild export --to hf`` writes for a translator): source.spm and
  target.spm the same model, and vocab.json giving every piece of it its sentencepiece id; a published
  opus-mt folder's (two models, vocab.json's own rows) becomes a tokenizers file (``opus_vocab.py``);
- tokenizer.model (what the decoder-only and tagger exports write), with tbuild-tokenizer.json where present
  naming the same pieces; Llama's and Mistral's (``<unk>`` 0, ``<s>`` 1, ``</s>`` 2, no PAD) with a PAD put
  first (``spm_pad.py``);
- else tokenizer.json: where its ids 0 to 3 are not tbuild's PAD, UNK, BOS and EOS (BERT's, RoBERTa's), it is
  renumbered and the model's vocabulary rows with it (``hf_ids.py``);
- else, for an M2M100 model, M2M100Tokenizer's files (sentencepiece.bpe.model, vocab.json in fairseq's
  numbering, language tokens after it) as a tokenizers file (``m2m100_vocab.py``).
Anything else (a vocabulary per side, no tokenizer tbuild reads) is refused in one line naming the file or
what is missing.
"""

from __future__ import annotations

import json
from pathlib import Path

from tbuild.builder.spec import MIN_VOCAB
from tbuild.builder.tokens import BOS, EOS, PAD

from ..data.tokenizer import Tokenizer
from ..data.tokenizers_file import NAME as TOKENIZERS
from ..data.tokenizers_file import TokenizersProcessor
from ..errors import DataError
from .hf_ids import ROLES, Renumbering, renumbered_file, renumbering, special_ids
from .hf_source import UnsupportedImport
from .m2m100_vocab import m2m100_tokenizer
from .opus_vocab import opus_tokenizer
from .spm_pad import padded, unpadded


def _pieces(tok: Tokenizer) -> list[str]:
    return [tok.sp.id_to_piece(i) for i in range(tok.vocab_size)]


def _load(path: Path) -> Tokenizer:
    try:
        return Tokenizer.load(path)
    except DataError as e:
        raise UnsupportedImport(str(e)) from None


def _marian(folder: Path, config: dict) -> Tokenizer | None:
    """The folder's one sentencepiece model where it is tbuild's (what ``tbuild export --to hf`` writes:
    source.spm and target.spm the same model, vocab.json its ids, config.json's ids tbuild's), else None."""
    source, target, vocab = (folder / n for n in ("source.spm", "target.spm", "vocab.json"))
    for path in (source, target, vocab):
        if not path.is_file():
            raise UnsupportedImport(f"{path}: missing (MarianTokenizer's files: source.spm, target.spm, vocab.json)")
    given = {"pad_token_id": PAD, "eos_token_id": EOS, "decoder_start_token_id": BOS}
    if source.read_bytes() != target.read_bytes() or any(config.get(f) != i for f, i in given.items()):
        return None
    tok = _load(source)
    try:
        ids = json.loads(vocab.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UnsupportedImport(f"{vocab}: not readable JSON ({e})") from None
    agrees = isinstance(ids, dict) and all(ids.get(p) == i for i, p in enumerate(_pieces(tok)))
    return tok if agrees else None


def _spm(folder: Path, config: dict, scratch: Path) -> tuple[Tokenizer, Renumbering | None]:
    """tokenizer.model as it is where its ids are tbuild's, or with a PAD put first where it numbers ``<unk>``
    0, ``<s>`` 1, ``</s>`` 2 and has no PAD (Llama's, Mistral's): every id one up, PAD a copy of UNK's row."""
    path = folder / "tokenizer.model"
    if unpadded(path):
        tok = _load(padded(path, config, scratch / "spm.model"))
        return tok, Renumbering((0, *range(tok.vocab_size - 1)), frozenset({0}))  # PAD: a copy of UNK's row
    _config_agrees(config)
    tok = _load(path)
    named = folder / "tbuild-tokenizer.json"
    if named.is_file():
        try:
            vocabulary = json.loads(named.read_text(encoding="utf-8"))["vocabulary"]
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as e:
            raise UnsupportedImport(f"{named}: not readable ({e})") from None
        if vocabulary[: tok.vocab_size] != _pieces(tok):
            raise UnsupportedImport(f"{named}: its vocabulary is not tokenizer.model's pieces in id order")
    return tok, None


def _tokenizers_file(folder: Path, config: dict, scratch: Path) -> tuple[Tokenizer, Renumbering | None]:
    """tokenizer.json as it is where its ids 0 to 3 are tbuild's special tokens (and config.json agrees), else
    renumbered into ``scratch`` (with the renumbering)."""
    path = folder / TOKENIZERS
    try:
        tk = TokenizersProcessor(path).tk
    except DataError as e:
        raise UnsupportedImport(str(e)) from None
    special = {i for i, t in tk.get_added_tokens_decoder().items() if t.special}
    if _specials_in_place(special, config):
        return _load(path), None
    data = json.loads(path.read_text(encoding="utf-8"))  # readable: the library has just parsed it
    model = data.get("model") or {}
    unk = tk.token_to_id(model["unk_token"]) if isinstance(model.get("unk_token"), str) else model.get("unk_id")
    ids = special_ids(folder, config, tk.get_vocab(with_added_tokens=True), special, unk)
    numbering = renumbering(ids, tk.get_vocab_size(with_added_tokens=True))
    out = scratch / TOKENIZERS
    out.write_text(json.dumps(renumbered_file(data, numbering), ensure_ascii=False), encoding="utf-8")
    return _load(out), numbering


def _started(config: dict) -> dict:
    """config.json with an encoder-decoder's start as its BOS: tbuild's decoder starts from BOS, NLLB's from its
    EOS (so BOS becomes a copy of that row), Pegasus's from its PAD."""
    start = config.get("decoder_start_token_id")
    return config | {"bos_token_id": start} if isinstance(start, int) else config


def _specials_in_place(special: set[int], config: dict) -> bool:
    """Whether the file's ids 0 to 3 are special tokens (``special``: the ids of its special tokens) and
    config.json's special ids (where given) tbuild's."""
    given = {f"{role}_token_id": i for i, role in enumerate(ROLES)}
    agrees = all(config.get(field) in (None, want) for field, want in given.items())
    return agrees and all(i in special for i in range(len(ROLES)))


def _config_agrees(config: dict) -> None:
    """Refuse config.json special ids other than tbuild's where the tokenizer is not renumbered (a
    sentencepiece model's ids are the model's rows)."""
    fields = [(f"{role}_token_id", i) for i, role in enumerate(ROLES)] + [("decoder_start_token_id", BOS)]
    for field, want in fields:
        value = config.get(field)
        if value is not None and value != want:
            raise UnsupportedImport(f"config.json {field} {value!r}: tbuild's ids are PAD 0, UNK 1, BOS 2, EOS 3 and "
                                    "decoding starts from BOS (only a tokenizer.json is renumbered on import)")


def find_tokenizer(folder: Path, rows: int, config: dict, scratch: Path) -> tuple[Tokenizer, Renumbering | None]:
    """The folder's sentencepiece model or tokenizers file with tbuild's ids (renumbered into ``scratch`` where
    a tokenizers file numbers its special tokens otherwise; the refusal where nothing fits), and the
    renumbering of the model's vocabulary rows (None: none); the model's ``rows`` (its smallest vocabulary
    table) hold every piece."""
    numbering = None
    if (folder / "source.spm").exists() or (folder / "target.spm").exists():
        tok = _marian(folder, config)
        if tok is None:  # a published opus-mt folder: two models, vocab.json's rows, its own special ids
            tok, numbering = opus_tokenizer(folder, config, scratch)
    elif (folder / "tokenizer.model").exists():
        tok, numbering = _spm(folder, config, scratch)
    elif (folder / TOKENIZERS).exists():
        tok, numbering = _tokenizers_file(folder, _started(config), scratch)  # GPT-2's byte-level BPE, BERT's
    elif config.get("model_type") == "m2m_100":  # M2M100's own: sentencepiece.bpe.model, vocab.json, languages
        tok, numbering = m2m100_tokenizer(folder, config, scratch)
    else:
        other = next((n for n in ("spiece.model", "sentencepiece.bpe.model", "merges.txt", "vocab.txt")
                      if (folder / n).exists()), None)
        has = f" (it has {other}, which tbuild does not run)" if other else ""
        raise UnsupportedImport(f"{folder}: no tokenizer (source.spm/target.spm, tokenizer.model or "
                                f"tokenizer.json){has}")
    if tok.vocab_size - (numbering.added if numbering else 0) > rows:
        raise UnsupportedImport(f"{tok.path}: {tok.vocab_size} pieces but the model has {rows} vocabulary rows")
    if tok.vocab_size < MIN_VOCAB:  # fewer pieces than the model's rows is fine (Qwen2 pads its table), not this
        raise UnsupportedImport(f"{tok.path if tok.path.parent == folder else folder}: {tok.vocab_size} pieces for "
                                f"config.json's vocab_size {config.get('vocab_size', rows)}; a tbuild tokenizer "
                                f"has at least {MIN_VOCAB}")
    return tok, numbering
