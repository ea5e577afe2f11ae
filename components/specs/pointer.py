"""Specs of the decoder's pointers into the source (``tbuild.components.pointer``): for an output that
walks over its input (a parse tree's leaves over the sentence's words), the decoder is told at every
position which source position it has reached: the number of target tokens so far that consume one
source unit. Torch-free. Declared at ``model.decoder.pointer``; none by default."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import Field, field_validator

from ..registry import POINTER
from ..spec_base import ComponentSpec, Use


def parse_ids(text: str) -> list[int]:
    """The ids of an id set written as ranges, ``"5,7-9"`` -> [5, 7, 8, 9] (ValueError if malformed)."""
    ids: list[int] = []
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            raise ValueError(f"{part.strip()!r} is not an id or a range a-b of ids (e.g. 5,7-9)")
        lo, hi = int(first), int(last or first)
        if hi < lo:
            raise ValueError(f"range {part.strip()!r} ends before it starts")
        ids.extend(range(lo, hi + 1))
    return ids


def format_ids(ids: Iterable[int]) -> str:
    """An id set written as ranges, ``[5, 7, 8, 9]`` -> ``"5,7-9"`` (sorted, each id once)."""
    out: list[str] = []
    run: list[int] = []
    for i in sorted(set(ids)):
        if run and i != run[-1] + 1:
            out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
            run = []
        run.append(i)
    if run:
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ",".join(out)


class PointerSpecBase(ComponentSpec):
    """What moves the pointer, declared generically and resolved against the run's tokenizer when its
    spec is fitted (``advance_ids``, ``unit_ids`` are then written into the run's spec.yaml)."""

    advance: Literal["leaves"] | list[str] = Field(
        "leaves", description="The target tokens that consume one source unit: leaves (the data set's leaf "
        "tokens: treebank xx: XX; tags: the tags; words: every piece of a word) or a list of target tokens.")
    source: Literal["auto", "words", "pieces"] = Field(
        "auto", description="What one source unit is: words (the pointer lands on a word's first piece), pieces "
        "(each source piece); auto: pieces where the target copies the source's pieces (treebank linearization "
        "words), else words.")
    advance_ids: str | None = Field(
        None, description="The target ids of `advance` as ranges (5,7-9); filled in when the spec is fitted to "
        "its tokenizer (or given).")
    unit_ids: str | None = Field(
        None, description="source words: the source ids that begin a word as ranges; filled in when the spec is "
        "fitted to its tokenizer (or given).")

    @field_validator("advance_ids", "unit_ids")
    @classmethod
    def _ranges(cls, value: str | None) -> str | None:
        if value is not None:
            parse_ids(value)
        return value

    @field_validator("advance")
    @classmethod
    def _some_tokens(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, list) and not value:
            raise ValueError("advance lists no target token: name at least one, or use leaves")
        return value

    def check(self, uses: Sequence[Use]) -> None:
        if self.source == "pieces" and self.unit_ids is not None:
            raise ValueError("unit_ids are the source pieces that begin a word: only for source words")


@POINTER.declare
class NextWordSpec(PointerSpecBase):
    """The next word as a decoder input (deterministic attention, Ma et al. 2017; Liu et al. 2018): at
    target position t, p_t = the number of `advance` tokens among the tokens before t (clamped to the
    source's EOS), and the encoder's output at p_t's source position, through a learned d_model × d_model
    projection, is added to the decoder's input embedding (before its dropout)."""

    kind: Literal["next_word"] = "next_word"
    bias: bool = Field(False, description="A bias on the projection.")
