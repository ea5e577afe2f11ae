"""A masked LM (``model.kind: encoder_only`` with a ``masked_lm`` head; Devlin et al. 2019 §3.1): a split's
masked-piece perplexity and accuracy, its lines hidden as in training (``data/masked.py``, one copy masked
with the run's masking seed, so the figures are the same on every call). The commands it takes (it is
pretrained to start a tagger or classifier from): ``MASKED_LM_COMMANDS``, refused by its task otherwise."""

from __future__ import annotations

import time

from ..data.masked import encode_masked
from ..data.word_labels import LABEL_OFFSET
from ..loss import evaluate_loss
from ..run.directory import EvalRecord, Run
from .native import NativeEngine

MASKED_LM_COMMANDS = ("train", "evaluate", "export", "inspect")  # what a masked LM's run takes


def evaluate_masked_lm(run: Run, t: NativeEngine, split: str) -> EvalRecord:
    """The split's perplexity and accuracy over its hidden pieces (the original piece's probability, and
    whether it scores best, at each chosen position), the split masked once with the run's seed."""
    spec, started = run.spec, time.perf_counter()
    pairs = encode_masked(spec, split, t.tokenizer, lambda _: None)
    result = evaluate_loss(t.model, pairs, batch_tokens=spec.train.batch_tokens,
                           label_smoothing=spec.train.label_smoothing, policy=t.policy, special=t.tokenizer.special,
                           offset=LABEL_OFFSET)
    return EvalRecord(split=split, sentences=len(pairs), weights=t.weights, accuracy=result["accuracy"],
                      perplexity=result["ppl"], nll=result["nll"], tokens=result["tokens"],
                      seconds=time.perf_counter() - started, precision=t.precision)
