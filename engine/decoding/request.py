"""One decoding request: what to decode and how (search, lengths, sampling, target prefixes, lexical
constraints, n-gram blocking, n-best, output format, alignments), built once by the command line or
the server and passed to either engine; and the one table of what each engine honours, which the
export targets' check reads too (``export/targets.py``). Torch-free: ``validate`` reads the table."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from tbuild.builder.spec import DecodeSpec
from tbuild.builder.spec.decode import PATIENCE

from ..errors import TbuildError

FORMATS = ("text", "jsonl")
SAMPLING = ("topk", "topp", "temperature")


@dataclass(frozen=True)
class LineConstraints:
    """One input line's lexical constraints, as text: phrases its output must contain (``include``)
    and must not contain (``exclude``); as token ids: ``constraints.Phrases``."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()


class InvalidRequest(TbuildError, ValueError):
    """A request with a value out of range (one line naming the field)."""


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise InvalidRequest(message)


@dataclass(frozen=True)
class DecodeRequest:
    """Settings of one decoding call and its per-line inputs. Built from the spec's ``decode`` section
    by ``of``; any bad value is refused at construction (``InvalidRequest``)."""

    beam: int = 4  # beam size k; 1 is greedy
    alpha: float = 0.6  # length penalty α (search.length_penalty)
    max_len_a: float = 1.0  # max |Y| = floor(a · source length + b), EOS counted
    max_len_b: int = 50
    min_len: int = 0  # no EOS while |Y| < min_len
    nbest: int = 1  # hypotheses per line (with sampling: samples)
    stopping: str = "exact"  # when a sentence's beam search stops (search.STOPPING)
    patience: float = PATIENCE  # stopping patience: a sentence stops once ⌈patience · beam⌉ hypotheses have finished
    batch_tokens: int = 4000  # source tokens per batch, padding included
    sampling: Literal["topk", "topp", "temperature"] | None = None  # None: beam search
    topk: int = 10
    topp: float = 0.9
    temperature: float = 1.0
    seed: int = 0
    no_repeat_ngram: int = 0  # no n-gram of this size twice in an output (0: off)
    prefixes: tuple[str, ...] | None = None  # one target prefix per line ("" for none), forced first
    constraints: tuple[LineConstraints, ...] | None = None  # phrases each line's output must / must not contain
    step_rule: Callable[[list[int]], Any] | None = None  # a ban per batch of line indices (well-formed trees)
    format: str = "text"  # text or jsonl (jsonl: with each token's log-probability)
    align: bool = False  # a source position per output token (jsonl)

    def __post_init__(self) -> None:
        for name in ("beam", "nbest", "batch_tokens", "topk"):
            _check(getattr(self, name) >= 1, f"{name} must be at least 1 (got {getattr(self, name)})")
        for name in ("alpha", "max_len_a", "max_len_b", "min_len", "temperature", "seed", "no_repeat_ngram"):
            _check(getattr(self, name) >= 0, f"{name} must be 0 or more (got {getattr(self, name)})")
        _check(0 < self.topp <= 1, f"topp must be in (0, 1] (got {self.topp})")
        _check(self.stopping in ("exact", "beam", "patience"),
               f"stopping {self.stopping!r}: choose exact, beam or patience")
        _check(self.patience >= 1, f"patience must be at least 1 (got {self.patience})")
        _check(self.sampling is None or self.sampling in SAMPLING,
               f"sampling {self.sampling!r}: choose one of {', '.join(SAMPLING)}")
        _check(self.sampling is not None or self.nbest <= self.beam,
               f"nbest ({self.nbest}) cannot exceed beam ({self.beam})")
        _check(self.format in FORMATS, f"--format {self.format!r}: choose one of {', '.join(FORMATS)}")
        _check(not self.align or self.format == "jsonl", "--align writes alignments into --format jsonl")
        _check(self.sampling is None or not self.includes_phrases,
               "phrases to include (positive constraints) need beam search, not --sampling")

    @classmethod
    def of(cls, decode: DecodeSpec, **inputs: Any) -> DecodeRequest:
        """The spec's ``decode`` settings (its profiles and quantization aside) with ``inputs`` (any
        field: prefixes, constraints, format, ...) on top."""
        names = {f.name for f in fields(cls)}
        settings = {k: v for k, v in decode.model_dump(exclude={"profiles"}).items() if k in names}
        prefixes, constraints = inputs.pop("prefixes", None), inputs.pop("constraints", None)
        return cls(**(settings | inputs), prefixes=None if prefixes is None else tuple(prefixes),
                   constraints=None if constraints is None else tuple(constraints))

    def but(self, **changes: Any) -> DecodeRequest:
        """This request with ``changes`` (checked again)."""
        return replace(self, **changes)

    @property
    def width(self) -> int:
        """Rows the search keeps per sentence: the beam, or one per sample."""
        return self.beam if self.sampling is None else self.nbest

    @property
    def token_scores(self) -> bool:
        """Whether each token's log-probability is wanted (``--format jsonl``)."""
        return self.format == "jsonl"

    @property
    def includes_phrases(self) -> bool:
        return bool(self.constraints) and any(c.include for c in self.constraints)  # type: ignore[union-attr]


@dataclass(frozen=True)
class Hooks:
    """What an engine tells its caller while decoding: warnings (over-long lines), lines done, and the
    entry point's housekeeping between batches."""

    warn: Callable[[str], None] = lambda _: None
    progress: Callable[[int], None] = lambda _: None
    after_batch: Callable[[], None] = lambda: None


NO_HOOKS = Hooks()


# ----------------------------------------------------------------------------- what each engine honours


@dataclass(frozen=True)
class Feature:
    """Something a decoding may ask of an engine. ``kind``: a ``setting`` (a decode profile can set it),
    an ``input`` the call brings (an ensemble, alignments, phrases) or a ``spec`` property of the run
    (well-formed trees); ``asked``: whether a request asks for it (None: decided when loading);
    ``refusal``: the one-line error, ``{engine}`` standing for the engine's name."""

    what: str
    kind: Literal["setting", "input", "spec"]
    asked: Callable[[DecodeRequest], bool] | None
    refusal: str


ENSEMBLES = Feature("ensembles", "input", None, "--engine {engine}: ensembles decode with the native engine only")
ALIGNMENTS = Feature("alignments (--align)", "input", lambda r: r.align,
                     "--engine {engine} gives no alignments (--align): use --engine native")
INCLUDE = Feature("phrases to include (positive constraints)", "input", lambda r: r.includes_phrases,
                  "--engine {engine} cannot force phrases into outputs (positive constraints): use --engine native")
TREES = Feature("well-formed trees", "spec", lambda r: r.step_rule is not None,
                "--engine {engine} cannot keep outputs well-formed trees: use --engine native, or set "
                "data.dataset.well_formed: false to decode freely and repair")
MIN_LENGTH = Feature("a minimum output length", "setting", lambda r: r.min_len > 0,
                     "--engine {engine} has no minimum output length: use --engine native")
COLD_SAMPLING = Feature("sampling at temperature 0 (transformers needs a positive temperature)", "setting",
                        lambda r: r.sampling is not None and r.temperature == 0,
                        "{engine} cannot sample at temperature 0 (transformers needs a positive temperature)")

# The one table: what each engine (native, CTranslate2, transformers' generate for an hf export) lacks;
# everything else in a request it honours.
LACKS: dict[str, tuple[Feature, ...]] = {
    "native": (),
    "ctranslate2": (ENSEMBLES, ALIGNMENTS, INCLUDE, TREES, MIN_LENGTH),
    "hf": (MIN_LENGTH, COLD_SAMPLING),
}


def unsupported(engine: str, request: DecodeRequest, kinds: Sequence[str] = ("setting", "input", "spec")
                ) -> Feature | None:
    """The first feature of ``kinds`` that ``request`` asks for and ``engine`` lacks (None: it honours all)."""
    return next((f for f in LACKS[engine] if f.kind in kinds and f.asked is not None and f.asked(request)), None)


def check_request(engine: str, request: DecodeRequest) -> None:
    """Refuse, in one line, a request ``engine`` cannot honour."""
    lacking = unsupported(engine, request)
    if lacking is not None:
        raise TbuildError(lacking.refusal.format(engine=engine))


def check_ensemble(engine: str) -> None:
    """Refuse an ensemble for an engine that cannot decode one (or that is not an engine)."""
    if ENSEMBLES in LACKS.get(engine, (ENSEMBLES,)):
        raise TbuildError(ENSEMBLES.refusal.format(engine=engine))


def runtime_lacks(engine: str) -> list[str]:
    """What ``engine`` lacks that a call brings (not a decode profile's setting), as a user names it."""
    return [f.what for f in LACKS[engine] if f.kind == "input"]
