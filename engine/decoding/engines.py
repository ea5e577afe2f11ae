"""Decoding engines: tbuild's own beam search (``native``, ``translator.py``) or the run exported to
CTranslate2 (``ctranslate2``, ``ct2.py``). Both take the same lines and ``DecodeRequest`` to the same
n-best hypotheses: empty lines give none, over-long lines are truncated with a warning, input order is
kept. Loading one (the CTranslate2 export cached first): ``export/engines.py``; what each honours: the
table of ``request.py``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ..data.tokenizer import Tokenizer
from ..errors import TbuildError
from ..run.directory import Run
from .request import DecodeRequest, Hooks
from .search import Hypothesis

ENGINES = ("native", "ctranslate2")


class Engine(Protocol):
    name: str  # one of ENGINES
    tokenizer: Tokenizer
    weights: str  # which weights, for reports

    @property
    def precision(self) -> str: ...

    def translate(self, lines: list[str], request: DecodeRequest, hooks: Hooks = ...) -> list[list[Hypothesis]]: ...

    def alignments(self, lines: list[str], results: list[list[Hypothesis]]) -> list[list[int]]: ...


def load_native(runs: list[Run], *, quantization: str | None = None, checkpoint: Path | None = None,
                average: int | None = None, device: str = "auto", notify: Callable[[str], None] = lambda _: None,
                weights: list[float] | None = None, combine: str = "logprob", compiled: bool = False,
                labels: Callable | None = None) -> Engine:
    """The native translator of one run (``load_translator``; ``quantization`` default: the spec's
    ``decode.quantization``) or, of several, their ensemble (``labels``: of taggers or classifiers,
    ``load_ensemble``), checked for a shared tokenizer before any model is loaded, its combination rule told to
    ``notify``."""
    from .ensemble import ensemble_header, load_ensemble
    from .translator import load_translator

    def load(run: Run, checkpoint: Path | None = None) -> Engine:
        return load_translator(run, checkpoint=checkpoint, average=average, device=device, notify=notify,
                               quantization=quantization or run.spec.decode.quantization, compiled=compiled)

    if len(runs) == 1:
        if weights is not None:
            raise TbuildError("--weights needs several runs (an ensemble)")
        return load(runs[0], checkpoint)
    if checkpoint is not None:
        raise TbuildError("--checkpoint names one run's weights; an ensemble takes runs or checkpoint files")
    translator = load_ensemble(runs, weights, combine, load=load, labels=labels)
    notify(ensemble_header(len(runs), weights or [1.0] * len(runs), combine))
    return translator
