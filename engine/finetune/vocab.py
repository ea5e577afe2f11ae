"""``train.init.vocab: extend``: the source's tokenizer with the pieces of the new run's own appended,
so every piece the source knows keeps its id (and its embedding row) and the new data's pieces get new ones."""

from __future__ import annotations

from pathlib import Path

from ..errors import TbuildError
from ..files import atomic_write

NORMAL = 1  # sentencepiece's ModelProto.SentencePiece.Type.NORMAL


def check_extendable(source: Path) -> None:
    """Refuse extending the source's tokenizer ``source`` where it is a tokenizers file, as soon as the source is
    loaded (before this run trains its own tokenizer to find the new pieces)."""
    if source.suffix == ".json":
        raise TbuildError(f"train.init.vocab extend: the source's tokenizer {source} is a tokenizers file, and "
                          "extend appends sentencepiece pieces; use vocab: refuse (its tokenizer) or remap")


def extend_tokenizer(source: Path, own: Path, out: Path) -> int:
    """Write to ``out`` the model ``source`` with the normal pieces of ``own`` that it lacks appended, in
    ``own``'s order and scored below every source piece (so BPE applies all the source's merges first);
    returns how many were added. Extending an extended model by the same pieces adds none."""
    check_extendable(source)
    from sentencepiece import sentencepiece_model_pb2 as pb  # needs protobuf (a dependency for this)

    base, extra = pb.ModelProto(), pb.ModelProto()
    base.ParseFromString(source.read_bytes())
    extra.ParseFromString(own.read_bytes())
    have = {p.piece for p in base.pieces}
    lowest = min((p.score for p in base.pieces if p.type == NORMAL), default=0.0)
    added = 0
    for piece in extra.pieces:
        if piece.type == NORMAL and piece.piece not in have:
            added += 1
            base.pieces.add(piece=piece.piece, score=lowest - added, type=NORMAL)
            have.add(piece.piece)
    atomic_write(out, base.SerializeToString())
    return added
