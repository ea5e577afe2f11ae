"""The HTTP API's request, response and error models, and the mapping of a request's validation errors
to a status and a one-line message naming the problem (no FastAPI here: ``app.py`` declares the models
and the statuses in the OpenAPI document and maps ``RequestError`` to JSON)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, create_model


def _whole(value: Any) -> Any:
    """JSON Schema's integer is any number without a fraction (2.0 too); strict pydantic takes only ints."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


Count = Annotated[int, Field(ge=1, le=64), BeforeValidator(_whole)]  # beam, nbest


class RequestError(Exception):
    """A request the client can fix: ``status`` (4xx) and a one-line ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class Hyp(BaseModel):
    text: str
    score: float


class TranslateResponse(BaseModel):
    translations: list[str]
    scores: list[float] | None = None
    nbest: list[list[Hyp]] | None = None
    split: list[int] | None = Field(
        None, description="The indices of the sentences longer than the model's positions, each translated in "
                          "pieces (split after sentence ends, else between words, else within a word) whose best "
                          "translations are joined by a space (its score the pieces' summed; its n-best list that "
                          "one); absent when no sentence was split.")


class GenerateResponse(BaseModel):
    outputs: list[str] = Field(description="Each prompt followed by its continuation, as tbuild generate prints it.")
    scores: list[float] | None = None
    nbest: list[list[Hyp]] | None = None


class ClassifyResponse(BaseModel):
    tags: list[list[str]] | None = Field(None, description="A tagger's: each text's tags, one per "
                                                           "whitespace-separated word.")
    labels: list[str] | None = Field(None, description="A sequence classifier's: each text's label.")


class LinesRequest(BaseModel):
    """A request's lines (the field ``LINES``, ``NOUN`` in messages) and its options: the base of each
    endpoint's request, so that one set of limits and messages covers them all. The class states its route
    too (``POST /ROUTE``, answered with ``RESPONSE``; ``SUMMARY`` and ``DESCRIPTION`` go into the OpenAPI
    document), so that a task brings its endpoint whole and the app serves whichever it is given."""

    model_config = ConfigDict(extra="forbid", strict=True)  # JSON's types as the document states them: no 0 for false
    ROUTE: ClassVar[str]  # each endpoint's request says these five
    RESPONSE: ClassVar[type[BaseModel]]
    SERVED_BY: ClassVar[str]  # who answers at the route, in messages
    SUMMARY: ClassVar[str]
    DESCRIPTION: ClassVar[str]  # the lines' description in the document, with the limits: {lines}, {chars}, {tokens}
    LINES: ClassVar[str] = "src"
    NOUN: ClassVar[str] = "sentences"
    EXAMPLE: ClassVar[str] = '{"src": ["a sentence"]}'
    SPLITS: ClassVar[bool] = False  # a line over the model's positions is split (no 413), as /translate does

    @property
    def lines(self) -> list[str]:
        return getattr(self, self.LINES)

    def read(self) -> list[str]:
        """The lines as ``tbuild decode`` reads its input lines: surrounding whitespace (and a CR) stripped."""
        return [line.rstrip("\r").strip() for line in self.lines]


class SearchRequest(LinesRequest):
    """A request of an encoder-decoder's endpoint: its lines (a subclass's field) and the beam search's options
    for this request."""

    beam: Count | None = Field(None, description="Beam size (default: the spec's decode.beam).")
    alpha: float | None = Field(None, ge=0, le=10, description="Length penalty α (default: decode.alpha).")
    nbest: Count | None = Field(None, description="Also return the N best of each line (N above the beam widens "
                                "the beam to N).")
    scores: bool = Field(False, description="Also return each output's score (log-probability, length-penalised).")

    def options(self) -> dict[str, Any]:
        """The options given, for ``DecodeRequest.of`` (None: the spec's)."""
        return {"beam": self.beam, "alpha": self.alpha, "nbest": self.nbest}


class TranslateRequest(SearchRequest):
    """``POST /translate``: source sentences and, optionally, decoding options for this request."""

    ROUTE: ClassVar[str] = "translate"
    RESPONSE: ClassVar[type[BaseModel]] = TranslateResponse
    SERVED_BY: ClassVar[str] = "a translator"
    SUMMARY: ClassVar[str] = "Translate ``src`` (in order), with the run's decoding options or the request's."
    DESCRIPTION: ClassVar[str] = (
        "Source sentences, one per item: 1 to {lines}, each of at most {chars} characters (422 past either); one "
        "over the model's {tokens} tokens is translated in pieces (the response's split); an empty sentence gives "
        "an empty output.")
    SPLITS: ClassVar[bool] = True

    src: list[str] = Field(min_length=1, description="Source sentences, one per item (at least one); an empty "
                                                     "sentence gives an empty output.")


Sampling = Literal["topk", "topp", "temperature"]


class GenerateRequest(LinesRequest):
    """``POST /generate`` (a language model): prompts to continue and, optionally, the options of ``tbuild
    generate`` for this request."""

    ROUTE: ClassVar[str] = "generate"
    RESPONSE: ClassVar[type[BaseModel]] = GenerateResponse
    SERVED_BY: ClassVar[str] = "a language model"
    SUMMARY: ClassVar[str] = ("Continue each of ``prompts`` (in order) as ``tbuild generate`` does: beam search "
                              "(beam 1: greedy) or sampling with a seed, with the run's options or the request's.")
    DESCRIPTION: ClassVar[str] = (
        "Prompts, one per item: 1 to {lines}, each of at most {chars} characters (422 past either), and tokens that "
        "leave room for max_new_tokens in the model's {tokens} positions (413 above); an empty prompt generates "
        "from nothing.")
    LINES: ClassVar[str] = "prompts"
    NOUN: ClassVar[str] = "prompts"
    EXAMPLE: ClassVar[str] = '{"prompts": ["Ein Mann"]}'
    prompts: list[str] = Field(min_length=1, description="Prompts, one per item (at least one); an empty prompt "
                                                         "generates from nothing.")
    max_new_tokens: Annotated[int, Field(ge=1, le=4096), BeforeValidator(_whole)] | None = Field(
        None, description="Most tokens generated after each prompt (default: the spec's decode.max_len_b); "
                          "422 when it leaves no room in the model's positions.")
    beam: Count | None = Field(None, description="Beam size, 1: greedy (default: the spec's decode.beam).")
    alpha: float | None = Field(None, ge=0, le=10, description="Length penalty α (default: decode.alpha).")
    nbest: Count | None = Field(None, description="Also return the N best (N above the beam widens the beam to N) "
                                "or, sampling, N samples.")
    sampling: Sampling | None = Field(None, description="Sample instead of beam search (default: decode.sampling).")
    topk: Annotated[int, Field(ge=1, le=100000), BeforeValidator(_whole)] | None = Field(
        None, description="topk sampling's K (default: decode.topk).")
    topp: float | None = Field(None, gt=0, le=1, description="topp sampling's mass (default: decode.topp).")
    temperature: float | None = Field(None, gt=0, le=100, description="Sampling temperature (default: "
                                                                       "decode.temperature).")
    seed: Annotated[int, Field(ge=0, le=2**63 - 1), BeforeValidator(_whole)] | None = Field(
        None, description="Sampling seed: the same prompts, options and seed give the same outputs "
                          "(default: decode.seed).")
    scores: bool = Field(False, description="Also return each output's score (log-probability, length-penalised).")


class ClassifyRequest(LinesRequest):
    """``POST /classify`` (an encoder-only model): texts to label, one per item."""

    ROUTE: ClassVar[str] = "classify"
    RESPONSE: ClassVar[type[BaseModel]] = ClassifyResponse
    SERVED_BY: ClassVar[str] = "a tagger or classifier"
    SUMMARY: ClassVar[str] = ("Label each of ``texts`` (in order) as ``tbuild decode`` does: a tagger's tags, one "
                              "per word, or a sequence classifier's label.")
    DESCRIPTION: ClassVar[str] = (
        "Texts, one per item: 1 to {lines}, each of at most {chars} characters (422 past either); a tagger's at most "
        "{tokens} pieces (413 above), a classifier's cut there as in training; an empty text gets no tags or an "
        "empty label.")
    LINES: ClassVar[str] = "texts"
    NOUN: ClassVar[str] = "texts"
    EXAMPLE: ClassVar[str] = '{"texts": ["a text"]}'
    texts: list[str] = Field(min_length=1, description="Texts, one per item (at least one); an empty text gets "
                                                       "no tags (a tagger) or an empty label (a classifier).")


class ErrorBody(BaseModel):
    """Every error's body."""

    error: str = Field(description="What is wrong, in one line.")


class Health(BaseModel):
    """``GET /health``: the server's state, the model kind and endpoint it serves, and its batcher's counts
    so far."""

    status: Literal["ok", "draining"]
    kind: str = Field(description="The model's graph, as the spec names it: encoder_decoder, decoder_only or "
                      "encoder_only.")
    endpoint: str = Field(description="The route that decodes, its task's: /translate for a translator, "
                                      "another task's own (GET /openapi.json lists it).")
    pending: int = Field(description="Jobs (requests) queued, not yet decoded.")
    batches: int = Field(description="Engine calls.")
    requests: int
    sentences: int
    largest_batch: int = Field(description="Most sentences in one engine call.")


class Info(BaseModel):
    """``GET /info``: the model, its kind and endpoint, its engine, its tokenizer, the server's settings and
    the scores where evaluated."""

    model_config = ConfigDict(extra="allow")
    name: str
    kind: str = Field(description="The model's graph, as the spec names it: encoder_decoder, decoder_only or "
                      "encoder_only.")
    endpoint: str = Field(description="The route that decodes, its task's: /translate for a translator, "
                                      "another task's own (GET /openapi.json lists it).")
    params: int
    source_lang: str | None = Field(None, description="A translator's source language.")
    target_lang: str | None = Field(None, description="A translator's target language.")
    engine: str
    precision: str
    weights: str
    tokenizer_sha256: str
    decode: dict[str, Any] = Field(description="The spec's decoding settings.")
    batching: dict[str, Any]
    limits: dict[str, int] = Field(description="max_lines, max_chars, max_tokens.")
    bleu: dict[str, dict[str, Any]] | None = Field(
        None, description="A translator's, per evaluated split: bleu, bleu_signature, chrf.")
    scores: dict[str, dict[str, float]] = Field(
        description="Per evaluated split, what tbuild evaluate scored: perplexity, and the metrics of the run's task "
                    "(a translator's bleu, bleu_lowercase and chrf; a tagger's or classifier's accuracy and "
                    "baseline_accuracy; a summarizer's rouge1, rouge2 and rouge_l).")


@dataclass(frozen=True)
class Limits:
    max_lines: int  # sentences per request
    max_chars: int  # characters per sentence
    max_tokens: int  # source tokens per sentence (EOS included): the model's limit


def request_model(limits: Limits, base: type[LinesRequest] = TranslateRequest) -> type[LinesRequest]:
    """``base`` (an endpoint's request) with a server's line and character limits on its lines, so that
    they are checked by the model and stated in the OpenAPI document (the token limit needs the tokenizer:
    ``check_lengths``)."""
    sentence = Annotated[str, Field(max_length=limits.max_chars)]
    description = base.DESCRIPTION.format(lines=limits.max_lines, chars=limits.max_chars, tokens=limits.max_tokens)
    lines = (list[sentence], Field(min_length=1, max_length=limits.max_lines, description=description))
    return create_model(base.__name__, __base__=base, __doc__=base.__doc__, **{base.LINES: lines})


def _position(text: str, pos: int) -> str:
    """``pos`` in ``text`` as ``json`` says it: line and column from 1."""
    line, column = text.count("\n", 0, pos) + 1, pos - text.rfind("\n", 0, pos)
    return f"line {line}, column {column}"


def _limit_error(error: dict[str, Any], request: type[LinesRequest]) -> RequestError | None:
    """The 422 of a limit on the request's lines that the request schema states (``request_model``'s: minItems,
    maxItems, maxLength), None for any other error. (413 is the model's limit in tokens, which no schema states.)"""
    loc, kind, value = tuple(error["loc"][1:]), error["type"], error.get("input")
    field, noun = request.LINES, request.NOUN
    if loc == (field,) and kind == "too_short":
        return RequestError(422, f"{field}: the list of {noun} is empty")
    if loc == (field,) and kind == "too_long":
        return RequestError(422, f"{field}: {len(value)} {noun}, more than the limit of "
                                 f"{error['ctx']['max_length']} per request")
    if len(loc) == 2 and loc[0] == field and kind == "string_too_long":
        return RequestError(422, f"{field}[{loc[1]}]: {len(value)} characters, more than the limit of "
                                 f"{error['ctx']['max_length']}")
    return None


def validation_error(errors: Sequence[Any], body: Any,
                     request: type[LinesRequest] = TranslateRequest) -> RequestError:
    """The ``RequestError`` for FastAPI's validation ``errors`` of a ``request`` body (``loc`` starts with
    "body"): 400 for a body that is not JSON, 422 for a body of the wrong shape (reported before the
    limits), 422 for too many, too long or no lines (the limits the schema states)."""
    first = errors[0]
    if first["type"] == "json_invalid":
        text = body if isinstance(body, str) else ""
        where = f" ({_position(text, first['loc'][1])})" if len(first["loc"]) > 1 else ""
        reason = first.get("ctx", {}).get("error", first["msg"])
        return RequestError(400, f"the body is not valid JSON: {reason}{where}")
    limits = [_limit_error(e, request) for e in errors]
    shape = [e for e, limit in zip(errors, limits, strict=True) if limit is None]
    if not shape:  # only limits: the count of sentences before their lengths
        found = [limit for limit in limits if limit is not None]
        return next((r for r in found if r.message.startswith(f"{request.LINES}:")), found[0])
    first = shape[0]
    where = ".".join(str(p) for p in first["loc"][1:])
    if not where:
        return RequestError(422, f"the body must be a JSON object such as {request.EXAMPLE}, sent as "
                                 "application/json")
    return RequestError(422, f"{where}: {first['msg']}")


def check_lengths(lengths: list[int], limit: int, field: str = "src", unit: str = "tokens", why: str = "") -> None:
    """413 naming the first line whose tokens exceed ``limit`` (the model's; ``why``: how it is made up)."""
    for n, length in enumerate(lengths):
        if length > limit:
            raise RequestError(413, f"{field}[{n}]: {length} {unit}, more than the model's limit of {limit}{why}")
