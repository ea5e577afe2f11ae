"""The endpoints a run is served at (its task's ``serve`` chooses one: ``tasks/``; a task may bring its own, as
summarization does): a translator ``/translate`` (an encoder-decoder, or a decoder-only prefix LM), a language
model ``/generate`` (``decoding/lm.py``), a tagger or sequence classifier ``/classify`` (``decoding/tagger.py``,
``decoding/classifier.py``). An endpoint turns a request's lines into the batcher's job (their lengths,
checked against the model's limit, and a ``DecodeRequest``), decodes a gathered batch, and answers; its
request class (``api.py``) names its route and answer; ``service.py`` holds the batcher, the limits and
``/info`` common to all."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from tbuild.builder.spec import Spec

from ..data.word_labels import labels_of
from ..decoding.classifier import classify_lines
from ..decoding.engines import Engine
from ..decoding.lm import DEFAULT_MAX_POSITIONS, LanguageModel, generate
from ..decoding.native import NativeEngine
from ..decoding.request import DecodeRequest, InvalidRequest
from ..decoding.search import Hypothesis
from ..decoding.tagger import tag_lines
from ..run.directory import EvalRecord
from .api import (
    ClassifyRequest,
    ClassifyResponse,
    GenerateRequest,
    GenerateResponse,
    Hyp,
    LinesRequest,
    RequestError,
    TranslateRequest,
    TranslateResponse,
    check_lengths,
)
from .segments import Pieces, grouped, split_to_fit


class Endpoint(Protocol):
    request: type[LinesRequest]  # the endpoint's body (its limits added by ``api.request_model``), route, answer
    engine: Engine | NativeEngine  # name, tokenizer, weights, precision (for /info)
    max_tokens: int  # the model's limit (``Limits.max_tokens``)

    @property
    def endpoint(self) -> str: ...  # the route: its request's ROUTE

    def lengths(self, body: Any, lines: list[str]) -> list[int]: ...

    def decode_request(self, body: Any) -> DecodeRequest: ...

    def decode(self, lines: list[str], request: DecodeRequest) -> list[Any]: ...

    def respond(self, body: Any, results: list[Any]) -> Any: ...

    def info(self, evals: list[EvalRecord]) -> dict[str, Any]:
        """What ``/info`` says of this endpoint beyond what every one has (a translator's languages)."""
        ...


@dataclass
class Served:
    """What every endpoint has: its route (its request's) and nothing of its own in ``/info``."""

    @property
    def endpoint(self) -> str:
        """The route (``translate``, ``generate``...), as its request class names it."""
        return self.request.ROUTE  # type: ignore[attr-defined]

    def info(self, evals: list[EvalRecord]) -> dict[str, Any]:
        return {}


def request_of(spec: Spec, batch_tokens: int, options: dict[str, Any]) -> DecodeRequest:
    """The spec's decoding options with the request's (those given), 422 if they clash. An ``nbest`` above
    the beam widens the beam to it (the N best of a beam search need a beam of N), so every ``nbest`` the
    request schema allows is answered."""
    given = {k: v for k, v in options.items() if v is not None}
    if given.get("sampling", spec.decode.sampling) is None and given.get("nbest", 1) > given.get("beam",
                                                                                                spec.decode.beam):
        given["beam"] = given["nbest"]
    try:
        return DecodeRequest.of(spec.decode, batch_tokens=batch_tokens, **given)
    except InvalidRequest as e:
        raise RequestError(422, str(e)) from None


def source_lengths(engine: Engine, lines: list[str]) -> list[int]:
    """Each line's source row length as the engine builds it, untruncated: its pieces and what the vocabulary
    adds around a source (EOS, or a template's); 0 for an empty line."""
    added = sum(map(len, engine.tokenizer.special.around("source")))
    return [len(ids) + added if ids else 0 for ids in engine.tokenizer.encode(lines)]


def texts_of(decode: Callable[[list[int]], str], results: list[list[Hypothesis]], body: Any
           ) -> tuple[list[str], list[float] | None, list[list[Hyp]] | None]:
    """Each line's best text, with its score and n-best list where ``body`` (scores, nbest) asks for them
    (an empty text and score 0 where a line has no output)."""
    return _answer([[Hyp(text=decode(h.tokens), score=h.score) for h in line] for line in results], body)


def _answer(hyps: list[list[Hyp]], body: Any) -> tuple[list[str], list[float] | None, list[list[Hyp]] | None]:
    """``texts_of`` of n-best lists already decoded."""
    return ([t[0].text if t else "" for t in hyps], [t[0].score if t else 0.0 for t in hyps] if body.scores else None,
            hyps if body.nbest else None)


@dataclass
class Translation(Served):
    """``/translate``: source sentences to their translations, through either engine."""

    engine: Engine
    spec: Spec
    batch_tokens: int
    max_tokens: int
    request: type[LinesRequest] = TranslateRequest

    def fits(self, line: str) -> bool:
        """Whether ``line``'s source row (its pieces and what is added around them) fits the model's positions."""
        return source_lengths(self.engine, [line])[0] <= self.max_tokens

    def lengths(self, body: TranslateRequest, lines: list[str]) -> list[int]:
        """Each line's source row length (with what the vocabulary adds around a source: EOS), at most the
        model's limit: a longer line is translated in pieces that each fit (``segments.py``)."""
        return [min(n, self.max_tokens) for n in source_lengths(self.engine, lines)]

    def decode_request(self, body: TranslateRequest) -> DecodeRequest:
        return request_of(self.spec, self.batch_tokens, body.options())

    def decode(self, lines: list[str], request: DecodeRequest) -> list[list[Hypothesis] | Pieces]:
        pieces = [split_to_fit(line, self.fits) for line in lines]
        results = self.engine.translate([piece for split in pieces for piece in split], request)
        return grouped(results, [len(split) for split in pieces])

    def info(self, evals: list[EvalRecord]) -> dict[str, Any]:
        """The languages, and sacreBLEU's scores and signatures per evaluated split."""
        return {"source_lang": self.spec.data.source_lang, "target_lang": self.spec.data.target_lang,
                "bleu": {e.split: {"bleu": e.bleu, "bleu_signature": e.bleu_signature, "chrf": e.chrf} for e in evals}}

    def respond(self, body: TranslateRequest, results: list[list[Hypothesis] | Pieces]) -> TranslateResponse:
        decode = self.engine.tokenizer.decode
        hyps = [[Hyp(text=decode(h.tokens), score=h.score) for h in line] if isinstance(line, list)
                else [Hyp(text=text, score=score) for text, score in [line.best(decode)]] for line in results]
        texts, scores, nbest = _answer(hyps, body)
        split = [n for n, line in enumerate(results) if isinstance(line, Pieces)]
        return TranslateResponse(translations=texts, scores=scores, nbest=nbest, split=split or None)


@dataclass
class Generation(Served):
    """``/generate``: prompts to the prompts and their continuations, as ``tbuild generate`` writes them."""

    lm: LanguageModel
    spec: Spec
    batch_tokens: int
    request: type[LinesRequest] = GenerateRequest

    @property
    def engine(self) -> NativeEngine:
        return self.lm.translator

    @property
    def max_tokens(self) -> int:
        return self.lm.max_positions or DEFAULT_MAX_POSITIONS

    def lengths(self, body: GenerateRequest, lines: list[str]) -> list[int]:
        """Each prompt's tokens; 413 for one that leaves no room for ``max_new_tokens`` in the model's
        positions (``tbuild generate`` keeps its last tokens instead, with a warning)."""
        new = body.max_new_tokens or self.spec.decode.max_len_b
        room = self.max_tokens - 1 - new  # BOS, the new tokens
        if room < 0:
            raise RequestError(422, f"max_new_tokens: {new} does not fit the model's {self.max_tokens} positions "
                                    "(BOS included)")
        lengths = [len(ids) for ids in self.engine.tokenizer.encode(lines)]
        check_lengths(lengths, room, "prompts", why=f" (its {self.max_tokens} positions less BOS and "
                                                    f"max_new_tokens {new})")
        return [max(n, 1) for n in lengths]  # as generate() batches them

    def decode_request(self, body: GenerateRequest) -> DecodeRequest:
        options = {name: getattr(body, name) for name in ("beam", "alpha", "nbest", "sampling", "topk", "topp",
                                                          "temperature", "seed")}
        return request_of(self.spec, self.batch_tokens, options | {"max_len_b": body.max_new_tokens})

    def decode(self, lines: list[str], request: DecodeRequest) -> list[list[Hypothesis]]:
        return generate(self.lm, lines, request, request.max_len_b)  # max_len_b: the new tokens

    def respond(self, body: GenerateRequest, results: list[list[Hypothesis]]) -> GenerateResponse:
        texts, scores, nbest = texts_of(self.engine.tokenizer.decode, results, body)
        return GenerateResponse(outputs=texts, scores=scores, nbest=nbest)


@dataclass
class Labelling(Served):
    """``/classify`` for a tagger: texts to their tags (one per word), as ``tbuild decode`` tags lines."""

    engine: NativeEngine
    spec: Spec
    batch_tokens: int
    request: type[LinesRequest] = ClassifyRequest

    def __post_init__(self) -> None:
        self.labels = labels_of(self.spec)

    @property
    def max_tokens(self) -> int:
        return self.engine.max_output_len or self.engine.max_source_tokens

    def lengths(self, body: ClassifyRequest, lines: list[str]) -> list[int]:
        """Each text's source row length: its pieces, at least one a word, and EOS (413 past the model's
        positions)."""
        tok = self.engine.tokenizer
        lengths = [sum(max(len(ids), 1) for ids in tok.encode(line.split())) + 1 if line else 0 for line in lines]
        check_lengths(lengths, self.max_tokens, "texts", unit="pieces")
        return lengths

    def decode_request(self, body: ClassifyRequest) -> DecodeRequest:
        return request_of(self.spec, self.batch_tokens, {})

    def decode(self, lines: list[str], request: DecodeRequest) -> list[Any]:
        return tag_lines(self.engine, self.spec, lines, request.batch_tokens)

    def respond(self, body: ClassifyRequest, results: list[Any]) -> ClassifyResponse:
        return ClassifyResponse(tags=results)


@dataclass
class Classifying(Labelling):
    """``/classify`` for a sequence classifier: texts to their labels (one per text), as ``tbuild decode``
    classifies lines."""

    def lengths(self, body: ClassifyRequest, lines: list[str]) -> list[int]:
        """Each text's source row length: BOS, its pieces and EOS (cut to the model's positions, as in
        training). A text holding a tab (a LABEL<TAB>TEXT line) is a 422."""
        for n, line in enumerate(lines):
            if "\t" in line:
                raise RequestError(422, f"texts[{n}] holds a tab: /classify takes text alone (for "
                                        "LABEL<TAB>TEXT lines send the text after the tab)")
        return [min(len(ids) + 2, self.max_tokens) if line else 0
                for line, ids in zip(lines, self.engine.tokenizer.encode(lines), strict=True)]

    def decode(self, lines: list[str], request: DecodeRequest) -> list[Any]:
        return classify_lines(self.engine, self.labels, lines, request.batch_tokens)

    def respond(self, body: ClassifyRequest, results: list[Any]) -> ClassifyResponse:
        return ClassifyResponse(labels=results)


def native_only(spec: Spec, request: type[LinesRequest], engine: str, compiled: bool, quantization: str | None = None,
                quantized: bool = True) -> None:
    """Refuse, in one line, another engine, ``--compile`` or (unless ``quantized``) a quantization other
    than float32 for a model served at ``request``'s route by the native engine alone."""
    from ..errors import TbuildError

    what = f"{request.SERVED_BY} ({spec.model.called}, served at /{request.ROUTE})"
    for given, option in ((engine != "native", f"--engine {engine}"), (compiled, "--compile")):
        if given:
            raise TbuildError(f"{option}: {what} is served by the native engine, uncompiled")
    if not quantized and quantization not in (None, "float32"):
        raise TbuildError(f"--quantization {quantization}: {what} is served in float32")
