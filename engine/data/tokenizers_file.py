"""A Hugging Face ``tokenizers`` file (tokenizer.json: GPT-2's byte-level BPE, Llama 3's, WordPiece) as a run's
tokenizer, for a model imported without a sentencepiece model. ``TokenizersProcessor`` answers the part of
sentencepiece's ``SentencePieceProcessor`` that ``Tokenizer`` and the commands use (encode, decode, pieces and
ids, special ids), so a ``Tokenizer`` holds either kind and every command reads it the same way.

tbuild's ids are PAD 0, UNK 1, BOS 2, EOS 3: the file's ids 0 to 3 must be special tokens (``added_tokens``
marked ``special``), which encoding never produces from text and decoding leaves to tbuild to drop."""

from __future__ import annotations

from pathlib import Path

from tbuild.builder.tokens import BOS, EOS, PAD, UNK

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
        self.special = {i for i, t in self.tk.get_added_tokens_decoder().items() if t.special}

    def _special(self, i: int) -> int:
        return i if i in self.special else -1

    def pad_id(self) -> int:
        return self._special(PAD)

    def unk_id(self) -> int:
        return self._special(UNK)

    def bos_id(self) -> int:
        return self._special(BOS)

    def eos_id(self) -> int:
        return self._special(EOS)

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
        i = self.tk.token_to_id(piece)
        return UNK if i is None else int(i)

    def is_control(self, i: int) -> bool:
        return int(i) in self.special

    def is_unknown(self, i: int) -> bool:
        return int(i) == UNK

    def is_unused(self, i: int) -> bool:
        del i
        return False

    def serialized_model_proto(self) -> bytes:
        raise DataError("this run's tokenizer is a tokenizers file (tokenizer.json), which pointer networks, "
                        "constrained parsing and vocabulary extension do not read: they need a sentencepiece model")
