"""``POST /phonemize``: words to their phones, as ``tbuild decode`` writes them (each word spelled letter by
letter, as the model reads it: ``cmudict.spelled``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from ...decoding.engines import Engine
from ...decoding.request import DecodeRequest
from ...decoding.search import Hypothesis
from ...serving.api import Hyp, LinesRequest, SearchRequest, check_lengths
from ...serving.endpoints import Served, request_of, source_lengths, texts_of
from .cmudict import spelled


class PhonemizeResponse(BaseModel):
    phonemes: list[str] = Field(description="Each word's phones, space-separated (ARPAbet; empty for an empty word).")
    scores: list[float] | None = None
    nbest: list[list[Hyp]] | None = None


class PhonemizeRequest(SearchRequest):
    """``POST /phonemize``: words to pronounce and, optionally, decoding options for this request."""

    ROUTE: ClassVar[str] = "phonemize"
    RESPONSE: ClassVar[type[BaseModel]] = PhonemizeResponse
    SERVED_BY: ClassVar[str] = "a grapheme-to-phoneme model"
    SUMMARY: ClassVar[str] = "Pronounce each of ``words`` (in order), with the run's decoding options or the request's."
    DESCRIPTION: ClassVar[str] = (
        "Words, one per item: 1 to {lines}, each of at most {chars} characters (422 past either) and {tokens} letters "
        "(413 above); an empty word gives no phones.")
    LINES: ClassVar[str] = "words"
    NOUN: ClassVar[str] = "words"
    EXAMPLE: ClassVar[str] = '{"words": ["hello"]}'

    words: list[str] = Field(min_length=1, description="Words, one per item (at least one).")


@dataclass
class Phonemize(Served):
    """``/phonemize``: words to their phones, through either engine."""

    engine: Engine
    spec: Any
    batch_tokens: int
    max_tokens: int
    request: type[LinesRequest] = PhonemizeRequest

    def lengths(self, body: PhonemizeRequest, lines: list[str]) -> list[int]:
        """Each word's source row length (its letters and EOS); 413 past the model's positions."""
        lengths = source_lengths(self.engine, [spelled(line) for line in lines])
        check_lengths(lengths, self.max_tokens, "words")
        return lengths

    def decode_request(self, body: PhonemizeRequest) -> DecodeRequest:
        return request_of(self.spec, self.batch_tokens, body.options())

    def decode(self, lines: list[str], request: DecodeRequest) -> list[list[Hypothesis]]:
        return self.engine.translate([spelled(line) for line in lines], request)

    def respond(self, body: PhonemizeRequest, results: list[list[Hypothesis]]) -> PhonemizeResponse:
        texts, scores, nbest = texts_of(self.engine.tokenizer.decode, results, body)
        return PhonemizeResponse(phonemes=texts, scores=scores, nbest=nbest)
