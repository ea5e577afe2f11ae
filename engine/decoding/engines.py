"""Decoding engines: tbuild's own beam search (``native``, ``translator.py``) or the run exported to
CTranslate2 (``ctranslate2``, ``ct2.py``). Both take the same lines to the same n-best hypotheses:
empty lines give none, over-long lines are truncated with a warning, input order is kept."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from tbuild.builder.schema import DecodeSpec

from ..data.tokenizer import Tokenizer
from ..errors import TbuildError
from ..run_dir import Run
from .constraints import LineConstraints
from .search import Hypothesis, StepRule

ENGINES = ("native", "ctranslate2")


class Engine(Protocol):
    name: str  # one of ENGINES
    tokenizer: Tokenizer
    weights: str  # which weights, for reports

    @property
    def precision(self) -> str: ...

    def translate(self, lines: list[str], spec: DecodeSpec, warn: Callable[[str], None] = ...,
                  progress: Callable[[int], None] = ..., after_batch: Callable[[], None] = ...,
                  prefixes: list[str] | None = None, scores: bool = False,
                  constraints: list[LineConstraints] | None = None,
                  step_rule: Callable[[list[int]], StepRule] | None = None) -> list[list[Hypothesis]]: ...

    def alignments(self, lines: list[str], results: list[list[Hypothesis]]) -> list[list[int]]: ...


def load_engine(run: Run, engine: str = "native", *, quantization: str | None = None,
                checkpoint: Path | None = None, average: int | None = None, device: str = "auto",
                notify: Callable[[str], None] = lambda _: None, compiled: bool = False) -> Engine:
    """The run's weights (``load_weights``'s choice) behind ``engine``. ``quantization`` (default: the
    spec's ``decode.quantization``) means the same for both engines: the weights type of the linear
    layers; native decodes float32 or int8 (``quantize.py``), CTranslate2 also int8_float32 and int16.
    ``notify`` hears about (re-)exports and the precision chosen. ``compiled``: the native decoder step
    through torch.compile (``compiled.py``; CTranslate2 is compiled code already)."""
    from .ct2 import load_ct2_translator
    from .translator import load_translator

    if engine not in ENGINES:
        raise TbuildError(f"--engine {engine!r}: choose one of {', '.join(ENGINES)}")
    quantization = quantization or run.spec.decode.quantization
    if engine == "native":
        return load_translator(run, checkpoint=checkpoint, average=average, device=device, quantization=quantization,
                               notify=notify, compiled=compiled)
    return load_ct2_translator(run, quantization=quantization, checkpoint=checkpoint,
                               average=average, device=device, notify=notify)


def load_engines(runs: list[Run], engine: str = "native", *, quantization: str | None = None,
                 checkpoint: Path | None = None, average: int | None = None, device: str = "auto",
                 notify: Callable[[str], None] = lambda _: None, weights: list[float] | None = None,
                 combine: str = "logprob", compiled: bool = False) -> Engine:
    """``load_engine`` of one run; several runs: their ensemble (native engine only), checked for a
    shared tokenizer before any model is loaded, its combination rule told to ``notify``."""
    from .ensemble import ensemble_header, load_ensemble

    if len(runs) == 1:
        if weights is not None:
            raise TbuildError("--weights needs several runs (an ensemble)")
        return load_engine(runs[0], engine, quantization=quantization, checkpoint=checkpoint, average=average,
                           device=device, notify=notify, compiled=compiled)
    if engine != "native":
        raise TbuildError(f"--engine {engine}: ensembles decode with the native engine only")
    if checkpoint is not None:
        raise TbuildError("--checkpoint names one run's weights; an ensemble takes runs or checkpoint files")
    translator = load_ensemble(runs, weights, combine, load=lambda run: load_engine(
        run, "native", quantization=quantization, average=average, device=device, notify=notify, compiled=compiled))
    notify(ensemble_header(len(runs), weights or [1.0] * len(runs), combine))
    return translator
