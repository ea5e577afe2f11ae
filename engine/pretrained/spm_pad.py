"""A sentencepiece model numbered as Llama's and Mistral's are (``<unk>`` 0, ``<s>`` 1, ``</s>`` 2, no padding
piece) in tbuild's ids (PAD 0, UNK 1, BOS 2, EOS 3): a ``<pad>`` control piece is put first, so every other id
moves one up and keeps its order. The model's vocabulary rows move alike, PAD's row a copy of UNK's that the
output never scores (``model.silent_ids``): every logit and log-probability is the folder's."""

from __future__ import annotations

from pathlib import Path

from ..files import atomic_write
from .hf_source import UnsupportedImport, read_spm

LLAMA_IDS = {"unk_id": 0, "bos_id": 1, "eos_id": 2, "pad_id": -1}  # sentencepiece's own defaults
CONTROL = 3  # sentencepiece's ModelProto.SentencePiece.Type.CONTROL
PAD = "<pad>"


def unpadded(path: Path) -> bool:
    """Whether the model at ``path`` is numbered as Llama's: <unk> 0, <s> 1, </s> 2, no PAD."""
    spec = read_spm(path).trainer_spec
    return all(getattr(spec, field) == value for field, value in LLAMA_IDS.items())


def padded(path: Path, config: dict, out: Path) -> Path:
    """The model at ``path`` with ``<pad>`` first, written to ``out``; config.json's ids must be the model's
    (a ``pad_token_id`` unset, or UNK's 0 as some folders set it)."""
    for field, want in (("bos_token_id", (None, 1)), ("eos_token_id", (None, 2)), ("pad_token_id", (None, 0))):
        if config.get(field) not in want:
            raise UnsupportedImport(f"config.json {field} {config.get(field)!r}: tokenizer.model numbers <unk> 0, "
                                    "<s> 1, </s> 2 and has no padding piece")
    proto = read_spm(path)
    if any(p.piece == PAD for p in proto.pieces):  # pragma: no cover - pad_id -1 with a <pad> piece
        raise UnsupportedImport(f"{path}: has a {PAD} piece but no pad_id")
    pieces = list(proto.pieces)
    del proto.pieces[:]
    proto.pieces.add(piece=PAD, score=0.0, type=CONTROL)
    proto.pieces.extend(pieces)
    spec = proto.trainer_spec
    spec.pad_id, spec.unk_id, spec.bos_id, spec.eos_id = 0, 1, 2, 3
    spec.pad_piece = PAD
    atomic_write(out, proto.SerializeToString())
    return out
