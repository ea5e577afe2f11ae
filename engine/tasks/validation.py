"""Validation by the task's metric (``train.select``): the first ``lines`` validation sources decoded
with the model being trained (``NativeEngine`` around it, beam ``select.beam``, length penalty and
maximum length from the spec's ``decode`` section) and scored as ``tbuild evaluate`` scores a split:
sacreBLEU BLEU, lowercased BLEU or chrF against the references (``decoding/evaluation.py``). A task with
outputs of its own (a parser's trees, scored by EVALB F1) gives a subclass (``ValidScorer.step_rule``,
``text``, ``score``) through its ``valid_scorer``.

The trainer spreads the lines over its processes (``training/scoring.py``): each decodes a share and every
process scores all of them, gathered: the same outputs, the same score everywhere."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from sacrebleu.metrics import BLEU, CHRF
from torch import nn

from tbuild.builder.spec import Spec

from ..data.datasets import read_split
from ..data.tokenizer import Tokenizer
from ..decoding.native import NativeEngine, max_source
from ..decoding.request import DecodeRequest
from ..device.policy import Policy


@dataclass
class ValidScorer:
    """The validation lines a metric decodes and what it scores them against: target lines (bleu,
    bleu_lowercase, chrf; a subclass's: a parser's gold trees)."""

    spec: Spec
    tokenizer: Tokenizer
    policy: Policy
    metric: str
    sources: list[str]
    references: list[str]

    @classmethod
    def of(cls, spec: Spec, tokenizer: Tokenizer, policy: Policy) -> ValidScorer | None:
        """The scorer of ``spec.train.select`` (None for ppl and accuracy, which decode nothing), its lines read as
        ``tbuild evaluate --split valid`` reads them."""
        select = spec.train.select
        if select.metric in ("ppl", "accuracy") or spec.data.valid is None:  # no decoding: the loss pass scores
            return None
        sources, references = read_split(spec.data, "valid", lambda _: None)
        return cls(spec, tokenizer, policy, select.metric, sources[: select.lines], references[: select.lines])

    def step_rule(self, translator: NativeEngine, lines: list[str]) -> Any:
        """What keeps each step's tokens within the task's outputs (None: any token)."""
        return None

    def text(self, tokens: list[int], line: str) -> str:
        """The text of an output (``tokens``) of the source ``line``: the tokenizer's."""
        return self.tokenizer.decode(tokens)

    def request(self, translator: NativeEngine, lines: list[str]) -> DecodeRequest:
        """The decode section's lengths and length penalty with ``select.beam``, one best output, no
        sampling (and the task's ``step_rule``, as ``tbuild evaluate`` decodes)."""
        return DecodeRequest.of(self.spec.decode, beam=self.spec.train.select.beam, nbest=1, sampling=None,
                                step_rule=self.step_rule(translator, lines))

    def decode(self, model: nn.Module, indices: list[int]) -> list[str]:
        """The outputs of the sources ``indices`` decoded with ``model`` in eval mode, without gradients
        (the caller puts the model back into training mode)."""
        lines = [self.sources[i] for i in indices]
        if not lines:
            return []
        max_positions = self.spec.model.max_positions
        translator = NativeEngine(model, self.tokenizer, self.policy, "training", max_source(self.spec), max_positions)
        model.eval()
        with torch.no_grad():
            results = translator.translate(lines, self.request(translator, lines))
        return [self.text(h[0].tokens, line) if h else "" for h, line in zip(results, lines, strict=True)]

    def score(self, outputs: list[str]) -> float:
        """The metric of ``outputs`` (one per source line) against the references."""
        scorer = {"bleu": BLEU(), "bleu_lowercase": BLEU(lowercase=True), "chrf": CHRF()}[self.metric]
        return float(scorer.corpus_score(outputs, [self.references]).score)
