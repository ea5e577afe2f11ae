"""The HTTP API's request, response and error models, and the mapping of a request's validation errors
to a status and a one-line message naming the problem (no FastAPI here: ``app.py`` declares the models
and the statuses in the OpenAPI document and maps ``RequestError`` to JSON)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, create_model

EXAMPLE = '{"src": ["a sentence"]}'


def _whole(value: Any) -> Any:
    """JSON Schema's integer is any number without a fraction (2.0 too); strict pydantic takes only ints."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


Count = Annotated[int, Field(ge=1, le=64), BeforeValidator(_whole)]  # beam, nbest


class RequestError(Exception):
    """A request the client can fix: ``status`` (4xx) and a one-line ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class TranslateRequest(BaseModel):
    """``POST /translate``: source sentences and, optionally, decoding options for this request."""

    model_config = ConfigDict(extra="forbid", strict=True)  # JSON's types as the document states them: no 0 for false
    src: list[str] = Field(min_length=1, description="Source sentences, one per item (at least one); an empty "
                                                     "sentence gives an empty output.")
    beam: Count | None = Field(None, description="Beam size (default: the spec's decode.beam).")
    alpha: float | None = Field(None, ge=0, le=10, description="Length penalty α (default: decode.alpha).")
    nbest: Count | None = Field(None, description="Also return the N best of each sentence (N ≤ beam).")
    scores: bool = Field(False, description="Also return each output's score (log-probability, length-penalised).")


class Hyp(BaseModel):
    text: str
    score: float


class TranslateResponse(BaseModel):
    translations: list[str]
    scores: list[float] | None = None
    nbest: list[list[Hyp]] | None = None


class ErrorBody(BaseModel):
    """Every error's body."""

    error: str = Field(description="What is wrong, in one line.")


class Health(BaseModel):
    """``GET /health``: the server's state and its batcher's counts so far."""

    status: Literal["ok", "draining"]
    pending: int = Field(description="Jobs (requests) queued, not yet decoded.")
    batches: int = Field(description="Engine calls.")
    requests: int
    sentences: int
    largest_batch: int = Field(description="Most sentences in one engine call.")


class Info(BaseModel):
    """``GET /info``: the model, its engine, its tokenizer, the server's settings and the scores where
    evaluated."""

    model_config = ConfigDict(extra="allow")
    name: str
    params: int
    source_lang: str
    target_lang: str
    engine: str
    precision: str
    weights: str
    tokenizer_sha256: str
    decode: dict[str, Any] = Field(description="The spec's decoding settings.")
    batching: dict[str, Any]
    limits: dict[str, int] = Field(description="max_lines, max_chars, max_tokens.")
    bleu: dict[str, dict[str, Any]] = Field(description="Per evaluated split: bleu, bleu_signature, chrf.")


@dataclass(frozen=True)
class Limits:
    max_lines: int  # sentences per request
    max_chars: int  # characters per sentence
    max_tokens: int  # source tokens per sentence (EOS included): the model's limit


def request_model(limits: Limits) -> type[TranslateRequest]:
    """``TranslateRequest`` with a server's sentence and character limits on ``src``, so that they are
    checked by the model and stated in the OpenAPI document (the token limit needs the tokenizer:
    ``check_lengths``)."""
    sentence = Annotated[str, Field(max_length=limits.max_chars)]
    description = (f"Source sentences, one per item: 1 to {limits.max_lines}, each of at most {limits.max_chars} "
                   f"characters and {limits.max_tokens} tokens (413 above); an empty sentence gives an empty output.")
    return create_model("TranslateRequest", __base__=TranslateRequest, __doc__=TranslateRequest.__doc__,
                        src=(list[sentence], Field(min_length=1, max_length=limits.max_lines, description=description)))


def _position(text: str, pos: int) -> str:
    """``pos`` in ``text`` as ``json`` says it: line and column from 1."""
    line, column = text.count("\n", 0, pos) + 1, pos - text.rfind("\n", 0, pos)
    return f"line {line}, column {column}"


def _limit_error(error: dict[str, Any]) -> RequestError | None:
    """The 413 or 422 of a limit on ``src`` (``request_model``'s), None for any other error."""
    loc, kind, value = tuple(error["loc"][1:]), error["type"], error.get("input")
    if loc == ("src",) and kind == "too_short":
        return RequestError(422, "src: the list of sentences is empty")
    if loc == ("src",) and kind == "too_long":
        return RequestError(413, f"src: {len(value)} sentences, more than the limit of {error['ctx']['max_length']} "
                                 "per request")
    if len(loc) == 2 and loc[0] == "src" and kind == "string_too_long":
        return RequestError(413, f"src[{loc[1]}]: {len(value)} characters, more than the limit of "
                                 f"{error['ctx']['max_length']}")
    return None


def validation_error(errors: Sequence[Any], body: Any) -> RequestError:
    """The ``RequestError`` for FastAPI's validation ``errors`` of a body (``loc`` starts with "body"):
    400 for a body that is not JSON, 422 for a body of the wrong shape (reported before the limits),
    413 for too many or too long sentences, 422 for an empty list."""
    first = errors[0]
    if first["type"] == "json_invalid":
        text = body if isinstance(body, str) else ""
        where = f" ({_position(text, first['loc'][1])})" if len(first["loc"]) > 1 else ""
        reason = first.get("ctx", {}).get("error", first["msg"])
        return RequestError(400, f"the body is not valid JSON: {reason}{where}")
    limits = [_limit_error(e) for e in errors]
    shape = [e for e, limit in zip(errors, limits, strict=True) if limit is None]
    if not shape:  # only limits: the count of sentences before their lengths
        found = [limit for limit in limits if limit is not None]
        return next((r for r in found if r.message.startswith("src:")), found[0])
    first = shape[0]
    where = ".".join(str(p) for p in first["loc"][1:])
    if not where:
        return RequestError(422, f"the body must be a JSON object such as {EXAMPLE}, sent as application/json")
    return RequestError(422, f"{where}: {first['msg']}")


def check_lengths(lengths: list[int], limits: Limits) -> None:
    """413 naming the first sentence whose source tokens exceed the model's limit."""
    for n, length in enumerate(lengths):
        if length > limits.max_tokens:
            raise RequestError(413, f"src[{n}]: {length} tokens, more than the model's limit of {limits.max_tokens}")
