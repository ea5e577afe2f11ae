"""A vocabulary's special tokens as data, defined once (torch-free, like every spec model here): ``Specials``,
the record a run keeps (``data.tokenizer.special``), its tokenizer reports (``Tokenizer.special``) and every
module takes its ids from, passed down as plain values.

- The roles: ``pad``, ``unk``, ``bos``, ``eos``, each an id of the vocabulary or None where it has no such
  token; roles may share an id (GPT-2's ``<|endoftext|>`` is its bos, eos and unk, and it has no pad).
- What is added around a sequence, as templates of role names around ``text``: ``source``, an input
  sequence (a translator's source; BERT's ``[bos, text, eos]`` is [CLS] … [SEP], Marian's ``[text, eos]``,
  GPT-2's ``[text]``), and ``target``, a decoder's sequence: the role its input starts from (tbuild's BOS,
  Marian's pad, M2M100's eos), the text, and EOS, where it stops.

``DEFAULT`` is tbuild's own numbering and adding (every sentencepiece model tbuild trains, every run written
before this record existed): PAD 0, UNK 1, BOS 2, EOS 3, sources text + EOS, targets BOS … EOS. Padding is
never told by an id: batches carry lengths or masks, and a vocabulary with no pad pads with ``fill``, a row
no unmasked position reads."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from ..spec_base import StrictModel

ROLES = ("pad", "unk", "bos", "eos")
TEXT = "text"
Part = Literal["text", "pad", "unk", "bos", "eos"]


class Specials(StrictModel):
    """A vocabulary's special ids (each a row, or None where it has none; roles may share one) and what is
    added around a sequence (``source``: an input's; ``target``: a decoder's, its first role the start)."""

    model_config = ConfigDict(frozen=True)

    pad: int | None = Field(0, ge=0, description="The padding token's id; None: the vocabulary has none.")
    unk: int | None = Field(1, ge=0, description="The unknown token's id; None: the vocabulary has none.")
    bos: int | None = Field(2, ge=0, description="The beginning-of-sequence token's id; None: none.")
    eos: int | None = Field(3, ge=0, description="The end-of-sequence token's id; None: none (no decoder then).")
    source: tuple[Part, ...] = Field(("text", "eos"), description="An input sequence: roles around text, "
                                     "e.g. [bos, text, eos] (BERT's [CLS] … [SEP]), [text] (GPT-2: nothing).")
    target: tuple[Part, ...] = Field(("bos", "text", "eos"), description="A decoder's sequence: the role its "
                                     "input starts from, text, eos (where it stops).")

    @model_validator(mode="after")
    def _templates(self) -> Specials:
        for side in ("source", "target"):
            parts = getattr(self, side)
            if parts.count(TEXT) != 1:
                raise ValueError(f"{side} {list(parts)}: one text among the roles")
            missing = next((p for p in parts if p != TEXT and getattr(self, p) is None), None)
            if missing is not None:
                raise ValueError(f"{side} {list(parts)}: adds {missing}, which this vocabulary has none of")
        if len(self.target) != 3 or self.target[1:] != (TEXT, "eos"):
            raise ValueError(f"target {list(self.target)}: a decoder reads one role before the text and stops at "
                             "eos: [ROLE, text, eos]")
        return self

    def ids(self, role: str) -> int:
        """The id of ``role`` (a KeyError-like ValueError where the vocabulary has none)."""
        found = getattr(self, role)
        if found is None:
            raise ValueError(f"this vocabulary has no {role} token")
        return found

    def around(self, side: str) -> tuple[list[int], list[int]]:
        """The ids added before and after the text of a ``side`` ("source" or "target") sequence."""
        parts = getattr(self, side)
        at = parts.index(TEXT)
        return [self.ids(p) for p in parts[:at]], [self.ids(p) for p in parts[at + 1:]]

    def wrap(self, pieces: list[int], side: str = "source") -> list[int]:
        """``pieces`` with what ``side`` adds around them."""
        before, after = self.around(side)
        return [*before, *pieces, *after]

    @property
    def start(self) -> int:
        """The id a decoder's input starts from (``target``'s first role)."""
        return self.ids(self.target[0])

    @property
    def stop(self) -> int:
        """The id a decoder stops at (EOS)."""
        return self.ids("eos")

    @property
    def special(self) -> frozenset[int]:
        """Every role's id."""
        return frozenset(i for i in (self.pad, self.unk, self.bos, self.eos) if i is not None)

    @property
    def skipped(self) -> frozenset[int]:
        """The ids decoded text leaves out: pad, bos, eos and the decoder's start (not unk)."""
        return frozenset(i for i in (self.pad, self.bos, self.eos, self.start) if i is not None)

    @property
    def never(self) -> tuple[int, ...]:
        """The ids a decoder never generates: pad and its start (tbuild's BOS), unless one is EOS's (GPT-2's
        bos; M2M100 starts from EOS)."""
        return tuple(sorted({i for i in (self.pad, self.start) if i is not None} - {self.eos}))

    @property
    def fill(self) -> int:
        """The id padding is filled with: read by no unmasked position (pad, else eos, else 0)."""
        return next(i for i in (self.pad, self.eos, 0) if i is not None)

    @property
    def is_default(self) -> bool:
        return self == DEFAULT

    def generating(self) -> Specials:
        """The record as a language model's search reads it: tbuild's own bans ``never``; an imported one's
        (any other record) bans nothing, as Hugging Face's ``generate`` (Llama may emit its BOS after text)."""
        return self if self.is_default else _Unbanned(**self.model_dump())


class _Unbanned(Specials):
    """A record whose decoders may generate every id (``Specials.generating``)."""

    @property
    def never(self) -> tuple[int, ...]:
        return ()


DEFAULT = Specials()
PAD, UNK, BOS, EOS = 0, 1, 2, 3  # DEFAULT's ids: for what makes the default record (sentencepiece training) and
# for tests of runs that have it
