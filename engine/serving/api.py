"""The HTTP API's request and response models, and the checks that turn a bad request into a status
and a message naming the problem (no FastAPI here: ``app.py`` maps ``RequestError`` to JSON)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class RequestError(Exception):
    """A request the client can fix: ``status`` (4xx) and a one-line ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class TranslateRequest(BaseModel):
    """``POST /translate``: source sentences and, optionally, decoding options for this request."""

    model_config = ConfigDict(extra="forbid")
    src: list[str] = Field(description="Source sentences, one per item; an empty one gives an empty output.")
    beam: int | None = Field(None, ge=1, le=64, description="Beam size (default: the spec's decode.beam).")
    alpha: float | None = Field(None, ge=0, le=10, description="Length penalty α (default: decode.alpha).")
    nbest: int | None = Field(None, ge=1, le=64, description="Also return the N best of each sentence.")
    scores: bool = Field(False, description="Also return each output's score (log-probability, length-penalised).")


class Hyp(BaseModel):
    text: str
    score: float


class TranslateResponse(BaseModel):
    translations: list[str]
    scores: list[float] | None = None
    nbest: list[list[Hyp]] | None = None


@dataclass(frozen=True)
class Limits:
    max_lines: int  # sentences per request
    max_chars: int  # characters per sentence
    max_tokens: int  # source tokens per sentence (EOS included): the model's limit


def parse_request(body: bytes, limits: Limits) -> TranslateRequest:
    """The request in ``body``, or a ``RequestError``: 400 for a body that is not UTF-8 JSON, 422 for
    fields of the wrong shape or an empty list, 413 for too many or too long sentences (the token
    limit is checked by ``check_lengths``, which needs the tokenizer)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RequestError(400, f"the body is not valid UTF-8 (byte {e.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise RequestError(400, f"the body is not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    if not isinstance(data, dict):
        raise RequestError(422, 'the body must be a JSON object such as {"src": ["a sentence"]}')
    try:
        request = TranslateRequest.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise RequestError(422, f"{where}: {first['msg']}") from None
    if not request.src:
        raise RequestError(422, "src: the list of sentences is empty")
    if len(request.src) > limits.max_lines:
        raise RequestError(413, f"src: {len(request.src)} sentences, more than the limit of {limits.max_lines} "
                                "per request")
    for n, line in enumerate(request.src):
        if len(line) > limits.max_chars:
            raise RequestError(413, f"src[{n}]: {len(line)} characters, more than the limit of {limits.max_chars}")
    return request


def check_lengths(lengths: list[int], limits: Limits) -> None:
    """413 naming the first sentence whose source tokens exceed the model's limit."""
    for n, length in enumerate(lengths):
        if length > limits.max_tokens:
            raise RequestError(413, f"src[{n}]: {length} tokens, more than the model's limit of {limits.max_tokens}")
