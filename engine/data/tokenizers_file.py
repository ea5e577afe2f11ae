"""A Hugging Face ``tokenizers`` file (tokenizer.json: GPT-2's byte-level BPE, Llama 3's, WordPiece) as a run's
tokenizer, for a model imported without a sentencepiece model. ``TokenizersProcessor`` answers the part of
sentencepiece's ``SentencePieceProcessor`` that ``Tokenizer`` and the commands use (encode, decode, pieces and
ids, special ids), so a ``Tokenizer`` holds either kind and every command reads it the same way.

The file's ids are the model's. Which are its special ids is the run's record (``data.tokenizer.special``,
written by the import from the folder's files; tbuild's own ids where the spec has none, as imports before the
record wrote them): each role's id must be a special token of the file (``added_tokens`` marked ``special``),
which encoding never produces from text and decoding leaves out."""

from __future__ import annotations

from pathlib import Path

from tbuild.components.specs.special import ROLES, Specials

from ..errors import DataError
from ..extras import require
from ..run.directory import TOKENIZERS_FILE as NAME  # noqa: F401 - its name in a run (and in a published folder)

SUFFIX = ".json"  # a tokenizer file of this suffix is a tokenizers file, not a sentencepiece model


class TokenizersProcessor:
    """The ``SentencePieceProcessor`` calls tbuild makes, answered by a ``tokenizers.Tokenizer``."""

    def __init__(self, path: Path) -> None:
        tokenizers = require("tokenizers", "tbuild[export]", f"the tokenizer {path.name}")
        try:
            self.tk = tokenizers.Tokenizer.from_file(str(path))
        except Exception as e:  # noqa: BLE001 - the library's parse errors: one line naming the file
            reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise DataError(f"{path}: not a readable tokenizers file ({reason})") from None
        self.tk.no_padding()  # a published file's fixed-length padding and truncation (tbuild pads its batches by
        self.tk.no_truncation()  # lengths and cuts by the model's positions itself; the import clears them too)
        self.special = {i for i, t in self.tk.get_added_tokens_decoder().items() if t.special}
        model = self.tk.model  # the unknown id: the model's own (unk_token, unk_id), -1 where it has none, until
        name = getattr(model, "unk_token", None)  # the run's record names one (check_special)
        found = self.tk.token_to_id(name) if isinstance(name, str) else getattr(model, "unk_id", None)
        self.unk = -1 if found is None else int(found)

    def get_piece_size(self) -> int:
        return int(self.tk.get_vocab_size(with_added_tokens=True))

    def encode(self, texts: list[str], out_type: type = int) -> list[list[int]]:
        """Ids per text, no special tokens added (tbuild adds BOS and EOS where its rows have them)."""
        del out_type
        return [e.ids for e in self.tk.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids`` without the special tokens (as sentencepiece leaves out control pieces): PAD, BOS, EOS,
        and others a published file marks special (NLLB's language codes, a forced target prefix)."""
        return self.tk.decode([int(i) for i in ids], skip_special_tokens=True)

    def decode_pieces(self, pieces: list[str]) -> str:
        return self.decode([self.piece_to_id(p) for p in pieces])

    def id_to_piece(self, i: int) -> str:
        piece = self.tk.id_to_token(int(i))
        return piece if piece is not None else ""

    def piece_to_id(self, piece: str) -> int:
        """The piece's id; one the file lacks: its model's unknown token's (-1 where it has none)."""
        i = self.tk.token_to_id(piece)
        return self.unk if i is None else int(i)


    def is_control(self, i: int) -> bool:
        return int(i) in self.special

    def is_unknown(self, i: int) -> bool:
        return int(i) == self.unk

    def is_unused(self, i: int) -> bool:
        del i
        return False

    def serialized_model_proto(self) -> bytes:
        raise DataError("this run's tokenizer is a tokenizers file (tokenizer.json), which pointer networks, "
                        "constrained parsing and vocabulary extension do not read: they need a sentencepiece model")


def check_special(processor: TokenizersProcessor, path: Path, special: Specials) -> Specials:
    """``special`` where each of its roles is a special token of the file (one line naming the first that is
    not: ``data.tokenizer.special``'s, or tbuild's own 0 to 3 for a file imported before the record)."""
    for role in ROLES:
        i = getattr(special, role)
        if i is not None and i not in processor.special:
            raise DataError(f"{path}: {role} id {i} is not a special token of the file (special: "
                            f"{sorted(processor.special)[:8]}); data.tokenizer.special names the file's own")
    if special.unk is not None:
        processor.unk = special.unk
    return special
