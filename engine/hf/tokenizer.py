"""A Hugging Face folder's tokenizer as an imported run's, in the folder's own ids, with its special ids
(``special.py``), and the tokenizer files an export writes. A run holds one sentencepiece model (spm.model) or
one tokenizers file (tokenizer.json); a folder's tokenizer becomes one of them:

- MarianTokenizer's files (source.spm, target.spm, vocab.json): where both models are one and vocab.json
  gives every piece its sentencepiece id (what ``tbuild export --to hf`` writes), that model; else (a
  published opus-mt folder: two models, vocab.json's own rows) a tokenizers file over vocab.json's rows
  (``vocab.py``: source.spm's segmentation, the language tokens ``>>fr<<`` matched whole);
- tokenizer.model (Llama's, Mistral's; what tbuild's decoder-only and encoder exports write, with
  tbuild-tokenizer.json naming its record and pieces): that model, its roles its own;
- tokenizer.json: that file (GPT-2's byte-level BPE, BERT's WordPiece, RoBERTa's);
- spiece.model (T5Tokenizer's, where the folder has no tokenizer.json): that model, its roles its own;
- M2M100Tokenizer's files (``m2m100.py``).
Anything else is refused in one line naming the file or what is missing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tbuild.builder.spec import MIN_VOCAB, Spec
from tbuild.components.specs.special import ROLES, TEXT, Specials

from ..data.tokenizer import Tokenizer
from ..data.tokenizers_file import NAME as TOKENIZERS
from ..data.tokenizers_file import TokenizersProcessor
from ..errors import DataError
from .agreement import check_agreement
from .folder import UnsupportedImport, read_json, read_spm
from .m2m100 import m2m100_tokenizer
from .special import USUAL, Note, optional_json, processor_template, role_ids, source_template, specials
from .vocab import Codes, vocab_tokenizer, vocabulary

RECORD = "tbuild-tokenizer.json"  # beside an export's tokenizer.model: its record, pieces and first token
SEQ2SEQ = frozenset({"marian", "pegasus", "m2m_100", "t5", "bart", "mbart"})  # their tokenizers end a source with </s>
SPIECE = "spiece.model"  # T5Tokenizer's sentencepiece model
CLEARED = ("padding", "truncation")  # a published tokenizer.json's settings tbuild does not keep


def _load(path: Path, special: Specials | None = None) -> Tokenizer:
    try:
        return Tokenizer.load(path, special)
    except DataError as e:
        raise UnsupportedImport(str(e)) from None


def _rows(config: dict, pieces: list[str]) -> set[int]:
    """The rows of a vocab.json's special tokens: config.json's ids, and the usual names' rows."""
    given = {config.get(f) for f in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id")}
    named = {i for i, p in enumerate(pieces) if any(p in usual for usual in USUAL.values())}
    return {i for i in given if isinstance(i, int) and 0 <= i < len(pieces)} | named


def _marian(folder: Path, config: dict, scratch: Path) -> Path:
    """The folder's one sentencepiece model (tbuild's export), else a tokenizers file in ``scratch`` (opus-mt)."""
    source, target, vocab = (folder / n for n in ("source.spm", "target.spm", "vocab.json"))
    for path in (source, target, vocab):
        if not path.is_file():
            raise UnsupportedImport(f"{path}: missing (MarianTokenizer's files: source.spm, target.spm, vocab.json)")
    pieces = vocabulary(vocab)
    proto = read_spm(source)
    if source.read_bytes() == target.read_bytes() and [p.piece for p in proto.pieces] == pieces:
        return source
    read_spm(target)  # read: a corrupt file is named now, not at decode time
    tok_config = optional_json(folder / "tokenizer_config.json")
    if tok_config.get("separate_vocabs") or tok_config.get("target_vocab_file"):
        raise UnsupportedImport(f"{folder / 'tokenizer_config.json'} separate_vocabs: a vocabulary per side; "
                                "tbuild's imported translators share one")
    codes = Codes(tuple(p for p in pieces if p.startswith(">>") and p.endswith("<<")))  # MarianTokenizer's
    return vocab_tokenizer(proto, source, pieces, _rows(config, pieces), codes, scratch / TOKENIZERS)


def _spm_record(folder: Path, path: Path, config: dict) -> Specials:
    """A sentencepiece model's record: tbuild-tokenizer.json's where the folder has one (a tbuild export),
    else the model's own roles (config.json's ids must agree; a pad id that is unk's where the model has no pad,
    as some Llama folders set, is none) and the tokenizer_config.json adding."""
    named = folder / RECORD
    if named.is_file():
        data = read_json(named)
        pieces = [p.piece for p in read_spm(path).pieces]
        if data.get("vocabulary", pieces)[: len(pieces)] != pieces:
            raise UnsupportedImport(f"{named}: its vocabulary is not tokenizer.model's pieces in id order")
        if isinstance(data.get("special"), dict):
            return Specials.model_validate(data["special"])
    own = _load(path).special
    ids = {role: getattr(own, role) for role in ROLES}
    for role in ("bos", "eos", "pad"):
        given = config.get(f"{role}_token_id")
        unk_as_pad = role == "pad" and ids["pad"] is None and given == ids["unk"]
        if given is not None and given != ids[role] and not unk_as_pad:
            raise UnsupportedImport(f"config.json {role}_token_id {given!r}: {path.name}'s {role} id is {ids[role]}")
    pieces = {p.piece: i for i, p in enumerate(read_spm(path).pieces)}
    return specials(ids, {k: v for k, v in config.items() if k != "pad_token_id"},
                    source_template(folder, ids, pieces, None, config.get("model_type") in SEQ2SEQ))


def _file_record(folder: Path, path: Path, config: dict, published: bool, note: Note) -> Specials:
    """A tokenizers file's record (``published``: the folder's own tokenizer.json, not one built here)."""
    try:
        tk = TokenizersProcessor(path).tk
    except DataError as e:
        raise UnsupportedImport(str(e)) from None
    special = {i for i, t in tk.get_added_tokens_decoder().items() if t.special}
    data = read_json(path)
    model = data.get("model") or {}
    unk = tk.token_to_id(model["unk_token"]) if isinstance(model.get("unk_token"), str) else model.get("unk_id")
    vocab = tk.get_vocab(with_added_tokens=True)
    ids = role_ids(folder, config, vocab, special, unk)
    source = source_template(folder, ids, vocab, data.get("post_processor"), config.get("model_type") in SEQ2SEQ,
                             published=published, note=note)
    return specials(ids, config, source)


def _cleared(path: Path, scratch: Path, note: Note) -> Path:
    """The folder's tokenizer.json, or its copy in ``scratch`` without a published file's ``padding`` and
    ``truncation`` (said in ``note``: tbuild pads batches by their lengths and cuts by the model's positions)."""
    data = read_json(path)
    found = {k: data[k] for k in CLEARED if data.get(k) is not None}
    if not found:
        return path
    for key, value in found.items():
        shown = ", ".join(f"{k} {v}" for k, v in value.items() if k in ("strategy", "max_length", "direction"))
        note(f"{path.name}: its {key} ({shown or value}) cleared: tbuild pads batches by their lengths and cuts "
             "by the model's positions")
    out = scratch / TOKENIZERS
    out.write_text(json.dumps(data | dict.fromkeys(found), ensure_ascii=False), encoding="utf-8")
    return out


def find_tokenizer(folder: Path, rows: int, config: dict, scratch: Path, note: Note = lambda _: None) -> Tokenizer:
    """The folder's tokenizer (module docstring) with its record, every piece a row of the model's ``rows``;
    written into ``scratch`` where built or cleared (``note``: a line for the import's report each)."""
    published = False
    if (folder / "source.spm").exists() or (folder / "target.spm").exists():
        path = _marian(folder, config, scratch)
    elif (folder / "tokenizer.model").exists():
        path = folder / "tokenizer.model"
    elif (folder / TOKENIZERS).exists():
        path, published = _cleared(folder / TOKENIZERS, scratch, note), True
    elif (folder / SPIECE).exists() and config.get("model_type") == "t5":
        path = folder / SPIECE
    elif config.get("model_type") == "m2m_100":
        pieces = vocabulary(folder / "vocab.json") if (folder / "vocab.json").is_file() else []
        path = m2m100_tokenizer(folder, _rows(config, pieces), scratch / TOKENIZERS)
    else:
        other = next((n for n in ("spiece.model", "sentencepiece.bpe.model", "merges.txt", "vocab.txt")
                      if (folder / n).exists()), None)
        has = f" (it has {other}, which tbuild does not run)" if other else ""
        raise UnsupportedImport(f"{folder}: no tokenizer (source.spm/target.spm, tokenizer.model or "
                                f"tokenizer.json){has}")
    record = (_file_record(folder, path, config, published, note) if path.suffix == ".json"
              else _spm_record(folder, path, config))
    tok = _load(path, record)
    if tok.vocab_size > rows:
        raise UnsupportedImport(f"{tok.path}: {tok.vocab_size} pieces but the model has {rows} vocabulary rows")
    if tok.vocab_size < MIN_VOCAB:  # fewer pieces than the model's rows is fine (Qwen2 pads its table), not this
        raise UnsupportedImport(f"{tok.path if tok.path.parent == folder else folder}: {tok.vocab_size} pieces for "
                                f"config.json's vocab_size {config.get('vocab_size', rows)}; a tbuild tokenizer "
                                f"has at least {MIN_VOCAB}")
    if published and config.get("model_type") not in SEQ2SEQ:  # the folder's tokenizer.json, as transformers reads it
        check_agreement(folder, tok)
    return tok


def row_names(vocabulary: list[str], rows: int) -> list[str]:
    """One name per embedding row: the tokenizer's pieces, then ``<tbuild_unused_N>`` for rows past them."""
    return vocabulary[:rows] + [f"<tbuild_unused_{i}>" for i in range(len(vocabulary), rows)]


def write_tokenizer(tok: Tokenizer, spec: Spec, out: Path, max_length: int, *, rows: int, marian: bool,
                    bos_first: bool, spiece: bool = False) -> None:
    """The export's tokenizer files in ``out``, in the run's ids (module docstring): tokenizer.json, T5's spiece.model
    (``spiece``; ``extra_ids`` 0: every piece is the model's), MarianTokenizer's files (``marian``; vocab.json names
    the model's ``rows``) or tokenizer.model with tbuild-tokenizer.json (``bos_first``: rows start with BOS)."""
    special, vocabulary = tok.special, [tok.sp.id_to_piece(i) for i in range(tok.vocab_size)]
    tokens = {role: vocabulary[i] for role in ("unk", "eos", "pad", "bos") if (i := getattr(special, role)) is not None}
    if tok.path.suffix == ".json":
        _with_source_template(tok, out / TOKENIZERS)
        _config(out, {"tokenizer_class": "PreTrainedTokenizerFast"}, tokens, max_length)
    elif spiece:
        shutil.copyfile(tok.path, out / SPIECE)
        _config(out, {"tokenizer_class": "T5Tokenizer", "extra_ids": 0}, tokens, max_length)
    elif marian:
        for name in ("source.spm", "target.spm"):
            shutil.copyfile(tok.path, out / name)
        names = {p: i for i, p in enumerate(row_names(vocabulary, rows))}
        (out / "vocab.json").write_text(json.dumps(names, ensure_ascii=False))
        _config(out, {"tokenizer_class": "MarianTokenizer", "source_lang": spec.data.source_lang,
                      "target_lang": spec.data.target_lang, "separate_vocabs": False}, tokens, max_length)
    else:
        shutil.copyfile(tok.path, out / "tokenizer.model")
        record = {**{r: getattr(special, r) for r in ROLES}, "prepend_bos": bos_first, "vocabulary": vocabulary,
                  "special": special.model_dump(mode="json")}
        (out / RECORD).write_text(json.dumps(record, ensure_ascii=False) + "\n")


def _with_source_template(tok: Tokenizer, out: Path) -> None:
    """The run's tokenizer.json at ``out`` with a post-processor adding the record's ``source`` and without padding
    or truncation, so ``PreTrainedTokenizerFast`` encodes as the run does; byte for byte where nothing changes."""
    from tokenizers import processors

    special, data = tok.special, read_json(tok.path)
    ids = {role: getattr(special, role) for role in ROLES}
    token_to_id = tok.sp.tk.get_vocab(with_added_tokens=True)
    try:
        own = processor_template(data.get("post_processor"), ids, token_to_id) or (TEXT,)
    except UnsupportedImport:  # it adds a token that is no role's: the run does not add it
        own = None
    if own == special.source and not any(data.get(k) is not None for k in CLEARED):
        shutil.copyfile(tok.path, out)
        return
    tk = TokenizersProcessor(tok.path).tk  # a fresh copy, its padding and truncation dropped
    if own != special.source:
        names = {role: tok.sp.id_to_piece(i) for role, i in ids.items() if i is not None}
        single = ["$A" if part == TEXT else names[part] for part in special.source]
        pair = single + ["$B:1" if part == TEXT else f"{names[part]}:1" for part in special.source]
        tk.post_processor = processors.TemplateProcessing(
            single=single, pair=pair, special_tokens=sorted({(names[p], ids[p]) for p in special.source if p != TEXT}))
    tk.save(str(out))


def _config(out: Path, fields: dict, tokens: dict[str, str], max_length: int) -> None:
    config = {**fields, "model_max_length": max_length, **{f"{role}_token": t for role, t in tokens.items()}}
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
