"""Decoding engines: tbuild's own beam search (``native``, ``native.py``) or the run exported to
CTranslate2 (``ctranslate2``, ``ct2.py``). Both take the same lines and ``DecodeRequest`` to the same
n-best hypotheses: empty lines give none, over-long lines are truncated with a warning, input order is
kept. Loading one (the CTranslate2 export cached first): ``export/engines.py``; what each honours: the
table of ``request.py``."""

from __future__ import annotations

from typing import Protocol

from ..data.tokenizer import Tokenizer
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
