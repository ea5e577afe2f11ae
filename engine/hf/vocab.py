"""A vocab.json over a sentencepiece model (the layout of MarianTokenizer and M2M100Tokenizer) as one tokenizers
file in the folder's own ids (vocab.json's rows: the model's).

Such a tokenizer encodes text with the sentencepiece model and looks each piece up in vocab.json (a piece missing
there would be ``<unk>``, so such a piece is refused). The file written here does the same with one model over
the folder's tokens in their order: a Unigram scored as the sentencepiece model scores its pieces, or a BPE whose
merges are its pieces' splits in the order of their scores (as transformers' own conversions do), with the
sentencepiece model's normalization; vocab.json's pieces the model lacks are never chosen."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..extras import require
from .folder import UnsupportedImport, read_json

NORMAL, UNKNOWN, CONTROL, USER_DEFINED = 1, 2, 3, 4  # sentencepiece's ModelProto.SentencePiece.Type
MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}  # sentencepiece's TrainerSpec.ModelType
BPE = 2
KINDS = {1: "unigram", BPE: "bpe"}  # the kinds written here
NEVER = -1e9  # a piece's score that no segmentation prefers, below an unknown character's (min score - 10)


@dataclass(frozen=True)
class Codes:
    """Tokens matched whole wherever they occur in text (language codes): ``special`` ones are left out of
    decoded text, as special tokens are (M2M100's ``__fr__``), others kept (opus-mt's ``>>fr<<``)."""

    tokens: tuple[str, ...] = ()
    special: bool = False


def vocabulary(path: Path) -> list[str]:
    """vocab.json's pieces by row (every row 0 to n-1 named once)."""
    ids = read_json(path)
    rows = sorted(ids.values()) if all(isinstance(i, int) for i in ids.values()) else None
    if rows != list(range(len(ids))):
        raise UnsupportedImport(f"{path}: its ids are not the rows 0 to {len(ids) - 1}, each once")
    by_row = {i: p for p, i in ids.items()}
    return [by_row[i] for i in range(len(ids))]


def _normalizer(tokenizers, spec) -> object:  # noqa: ANN001 - the tokenizers module, a NormalizerSpec
    """sentencepiece's normalization as tokenizers runs it: the character map, then its whitespace rules."""
    steps = [tokenizers.normalizers.Precompiled(spec.precompiled_charsmap)] if spec.precompiled_charsmap else []
    if spec.remove_extra_whitespaces:
        steps += [tokenizers.normalizers.Replace(tokenizers.Regex(r"\A +| +\z"), ""),
                  tokenizers.normalizers.Replace(tokenizers.Regex(" {2,}"), " ")]
    return tokenizers.normalizers.Sequence(steps)


def _merges(proto) -> list[tuple[str, str]]:  # noqa: ANN001 - a BPE model's ModelProto
    """A BPE model's merges: every split of a piece into two pieces, the highest-scoring piece's first
    (sentencepiece merges the adjacent pair whose joined piece scores highest)."""
    scores = {p.piece: p.score for p in proto.pieces if p.type == NORMAL}
    ranked = [(-score, n, piece[:k], piece[k:]) for n, (piece, score) in enumerate(scores.items())
              for k in range(1, len(piece)) if piece[:k] in scores and piece[k:] in scores]
    return [(left, right) for *_, left, right in sorted(ranked)]


def _model(tokenizers, proto, names: list[str], special: set[int], unk: int) -> object:  # noqa: ANN001
    """The tokenizers model over ``names`` (the folder's ids) that segments as ``proto`` does (``special``:
    rows never chosen; ``unk``: the unknown piece's row)."""
    fallback = bool(proto.trainer_spec.byte_fallback)
    if proto.trainer_spec.model_type == BPE:
        return tokenizers.models.BPE({name: i for i, name in enumerate(names)}, _merges(proto),
                                     unk_token=names[unk], fuse_unk=True, byte_fallback=fallback)
    scores = {p.piece: p.score for p in proto.pieces if p.type in (NORMAL, USER_DEFINED)}
    vocab = [(name, NEVER if i in special else scores.get(name, NEVER)) for i, name in enumerate(names)]
    return tokenizers.models.Unigram(vocab, unk_id=unk, byte_fallback=fallback)


def _file(proto, names: list[str], special: set[int], unk: int, codes: Codes,  # noqa: ANN001 - the ModelProto
          path: Path) -> None:
    """The tokenizers file: ``_model`` with the sentencepiece model's normalization, its control pieces and the
    folder's special rows ``special`` special, ``codes`` matched whole."""
    tokenizers = require("tokenizers", "tbuild[export]", "a vocab.json tokenizer")
    tk = tokenizers.Tokenizer(_model(tokenizers, proto, names, special, unk))
    tk.normalizer = _normalizer(tokenizers, proto.normalizer_spec)
    prefix = "always" if proto.normalizer_spec.add_dummy_prefix else "never"
    tk.pre_tokenizer = tokenizers.pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=prefix, split=False)
    tk.decoder = tokenizers.decoders.Metaspace(replacement="▁", prepend_scheme=prefix, split=False)
    controls = {p.piece for p in proto.pieces if p.type in (UNKNOWN, CONTROL)}
    marked = [n for i, n in enumerate(names) if i in special or n in controls]
    tk.add_special_tokens([tokenizers.AddedToken(n, special=True, normalized=False) for n in marked])
    whole = [tokenizers.AddedToken(c, special=codes.special, normalized=False) for c in codes.tokens]
    (tk.add_special_tokens if codes.special else tk.add_tokens)(whole)
    tk.save(str(path))


def vocab_tokenizer(proto, spm_path: Path, pieces: list[str], special: set[int], codes: Codes,  # noqa: ANN001
                    out: Path) -> Path:
    """``pieces`` (the folder's token of each model row) over the sentencepiece model ``proto`` (read from
    ``spm_path``) as a tokenizers file at ``out`` in the folder's ids, ``special`` (the rows of the folder's
    special tokens) and ``<unk>`` special; a refusal naming the file where they do not fit."""
    kind = proto.trainer_spec.model_type
    if kind not in KINDS:
        raise UnsupportedImport(f"{spm_path}: a sentencepiece {MODEL_TYPES.get(kind, kind)} model; tbuild reads "
                                f"{' and '.join(KINDS.values())} models")
    known = set(pieces)
    missing = next((p.piece for p in proto.pieces if p.type == NORMAL and p.piece not in known), None)
    if missing is not None:
        raise UnsupportedImport(f"{spm_path}: piece {missing!r} has no row in vocab.json")
    unk = next((i for i, p in enumerate(pieces) if p == proto.pieces[proto.trainer_spec.unk_id].piece), None)
    if unk is None:
        raise UnsupportedImport(f"{spm_path}: its unknown piece has no row in vocab.json")
    _file(proto, pieces, special | {unk}, unk, codes, out)
    return out
