"""``POST /summarize``: texts to their summaries, as ``tbuild decode`` writes them. A text longer than the
model's positions is summarized from its first tokens (as ``decode`` and ``evaluate`` read it) and the answer
names it (``truncated``), where a translator would translate it in pieces and join them: a summary of the
pieces joined is not a summary of the text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from ...decoding.engines import Engine
from ...decoding.request import DecodeRequest
from ...decoding.search import Hypothesis
from ...serving.api import Hyp, LinesRequest, SearchRequest
from ...serving.endpoints import Served, request_of, source_lengths, texts_of


class SummarizeResponse(BaseModel):
    summaries: list[str] = Field(description="Each text's summary (empty for an empty text).")
    scores: list[float] | None = None
    nbest: list[list[Hyp]] | None = None
    truncated: list[int] | None = Field(
        None, description="The indices of the texts longer than the model's positions, each summarized from its "
                          "first tokens; absent when none was.")


class SummarizeRequest(SearchRequest):
    """``POST /summarize``: texts to summarize and, optionally, decoding options for this request."""

    ROUTE: ClassVar[str] = "summarize"
    RESPONSE: ClassVar[type[BaseModel]] = SummarizeResponse
    SERVED_BY: ClassVar[str] = "a summarizer"
    SUMMARY: ClassVar[str] = "Summarize each of ``texts`` (in order), with the run's decoding options or the request's."
    DESCRIPTION: ClassVar[str] = (
        "Texts, one per item: 1 to {lines}, each of at most {chars} characters (422 past either); one over the "
        "model's {tokens} tokens is summarized from its first tokens (the response's truncated); an empty text "
        "gives an empty summary.")
    LINES: ClassVar[str] = "texts"
    NOUN: ClassVar[str] = "texts"
    EXAMPLE: ClassVar[str] = '{"texts": ["a text"]}'
    SPLITS: ClassVar[bool] = True  # no 413: a long text is truncated

    texts: list[str] = Field(min_length=1, description="Texts, one per item (at least one); an empty text gives an "
                                                       "empty summary.")


@dataclass
class Summarize(Served):
    """``/summarize``: texts to their summaries, through either engine."""

    engine: Engine
    spec: Any
    batch_tokens: int
    max_tokens: int
    request: type[LinesRequest] = SummarizeRequest

    def lengths(self, body: SummarizeRequest, lines: list[str]) -> list[int]:
        """Each text's source row length as the engine reads it: at most the model's limit."""
        return [min(n, self.max_tokens) for n in source_lengths(self.engine, lines)]

    def decode_request(self, body: SummarizeRequest) -> DecodeRequest:
        return request_of(self.spec, self.batch_tokens, body.options())

    def decode(self, lines: list[str], request: DecodeRequest) -> list[list[Hypothesis]]:
        """The engine's n-best lists (it reads a long text's first tokens, as ``decode`` does)."""
        return self.engine.translate(lines, request)

    def respond(self, body: SummarizeRequest, results: list[list[Hypothesis]]) -> SummarizeResponse:
        texts, scores, nbest = texts_of(self.engine.tokenizer.decode, results, body)
        truncated = [n for n, length in enumerate(source_lengths(self.engine, body.read())) if length > self.max_tokens]
        return SummarizeResponse(summaries=texts, scores=scores, nbest=nbest, truncated=truncated or None)
