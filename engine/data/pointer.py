"""``model.decoder.pointer``'s id sets resolved against the run's tokenizer, once, when the spec is fitted
to it (``tokenizer.fit_vocab``): the target ids that move the pointer (``advance``) and, for source
words, the source pieces that begin a word (``unit_ids``). The fitted spec (the run's spec.yaml) holds
them, so a model built from it needs no tokenizer (``components/pointer.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from tbuild.builder.spec import Spec
from tbuild.components.specs.pointer import PointerSpecBase, format_ids

from ..errors import DataError
from .datasets import provider_of
from .linearize import LEAF

if TYPE_CHECKING:
    from sentencepiece import SentencePieceProcessor

    from tbuild.components.specs.special import Specials


class PieceSource(Protocol):
    """What the pointer reads of the run's tokenizer (``tokenizer.Tokenizer``, which fits the spec with
    ``fit_pointer``): its sentencepiece model, the file it came from (named in errors) and its special ids."""

    sp: SentencePieceProcessor
    path: Path
    special: Specials


SPACE = "\u2581"  # sentencepiece's word boundary: the first character of a word's first piece
USER_DEFINED = 4  # sentencepiece's ModelProto.SentencePiece.Type.USER_DEFINED: the whole target tokens
_WHERE = "model.decoder.pointer.advance"


def fit_pointer(spec: Spec, tok: PieceSource) -> Spec:
    """The spec with its pointer's ``source`` chosen and its id sets filled in (as it is without a pointer;
    id sets the spec gives are kept)."""
    pointer = spec.model.pointer()
    if pointer is None:
        return spec
    copies = provider_of(spec.data).leaves == "words"  # lexicalized trees: the source's own pieces
    source = pointer.source if pointer.source != "auto" else "pieces" if copies else "words"
    advance = pointer.advance_ids or format_ids(advance_ids(pointer, spec, tok))
    units = None if source == "pieces" else pointer.unit_ids or format_ids(word_starts(tok))
    fitted = pointer.model_copy(update={"source": source, "advance_ids": advance, "unit_ids": units})
    decoder = spec.model.decoder.model_copy(update={"pointer": fitted})
    return spec.model_copy(update={"model": spec.model.model_copy(update={"decoder": decoder})})


def advance_ids(pointer: PointerSpecBase, spec: Spec, tok: PieceSource) -> list[int]:
    """The target ids of ``pointer.advance``: the tokens it lists, or the leaf tokens of the data set's trees
    (as its provider writes them: ``Provider.leaves``)."""
    if isinstance(pointer.advance, list):
        return [_piece(tok, token) for token in pointer.advance]
    leaves = provider_of(spec.data).leaves
    assert leaves is not None  # leaves need trees: the spec's check (builder/spec/)
    pieces = _pieces(tok)
    brackets = {i for i, (text, kind) in enumerate(pieces) if _bracket(text) and kind == USER_DEFINED}
    if leaves == "words":  # every piece of a word: all but the brackets
        return [i for i in range(len(pieces)) if i not in brackets and i not in tok.special.special]
    if leaves == "xx":
        return [_piece(tok, LEAF)]
    tags = [i for i, (text, kind) in enumerate(pieces) if kind == USER_DEFINED and i not in brackets]
    if not tags:
        raise DataError(f"{_WHERE}: leaves are the tags, and no tag is a whole piece of {tok.path}: set "
                        "data.tokenizer.target_tokens to auto or whole")
    return tags


def word_starts(tok: PieceSource) -> list[int]:
    """The pieces that begin a word (sentencepiece writes the word boundary first), special ids left out."""
    return [i for i, (text, _) in enumerate(_pieces(tok)) if text.startswith(SPACE) and i not in tok.special.special]


def _piece(tok: PieceSource, token: str) -> int:
    """The id of a whole target token (written with or without the word boundary)."""
    for text in (SPACE + token.removeprefix(SPACE), token):
        i = tok.sp.piece_to_id(text)
        if i not in tok.special.special or tok.sp.id_to_piece(i) == text:
            return int(i)
    raise DataError(f"{_WHERE}: {token!r} is not one piece of {tok.path} (list whole target tokens, e.g. XX)")


def _pieces(tok: PieceSource) -> list[tuple[str, int]]:
    """Each piece's text and type."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    proto = pb.ModelProto()
    proto.ParseFromString(tok.sp.serialized_model_proto())
    return [(p.piece, p.type) for p in proto.pieces]


def _bracket(text: str) -> bool:
    bare = text.removeprefix(SPACE)
    return len(bare) > 1 and bare[0] in "()"
