"""Training speed on the batches users train on: a recipe's own data (specs/multi30k-v1.yaml by default),
prepared as `tbuild train` prepares it (its tokenizer, its encoded pairs, its ``BatchCursor`` cutting
``train.batch_tokens`` batches in the trainer's shuffled order, padding and all), and the trainer's own
step (``open_trainer`` then ``Trainer.step``): the real-workload row beside the synthetic training shapes.

One trainer per precision (fp32, and what ``precision: auto`` chooses on this machine), in one process,
both starting from the same seed, so the same batches in the same order; rounds interleaved (fp32, auto,
fp32, ...), each ``steps`` optimizer steps. The first ``warmup`` rounds are not counted. Per precision:
the median over the timed rounds of the round's target tokens (EOS counted, padding not) over its seconds.
The run directories (tokenizer and prepared data, no checkpoint: nothing is saved) are kept in ``root``
so that a second call skips the preparation; they are never the recipe's own run directory."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from tbuild.builder import load_spec
from tbuild.engine.device.policy import choose_policy, model_widths
from tbuild.engine.training.run import open_trainer
from tbuild.engine.training.trainer import Trainer

PRECISIONS = ("fp32", "auto")


@dataclass(frozen=True)
class RealTrain:
    spec: Path | dict  # a spec file, or a spec as a dict (tests)
    root: Path  # where the benchmark's run directories are kept
    steps: int  # optimizer steps per round
    warmup: int
    repeats: int


def _trainer(real: RealTrain, precision: str) -> Trainer:
    loaded = load_spec(real.spec)
    folder = real.root / f"{loaded.name}-{precision}"
    loaded = load_spec(real.spec, [f"output_dir={folder}", f"train.precision={precision}"])
    policy = choose_policy(precision, "cpu", widths=model_widths(loaded.spec))
    trainer = open_trainer(loaded, lambda kind, data: None, policy=policy)
    trainer.model.train()
    return trainer


def run_training_real(real: RealTrain) -> list[dict]:
    """One row per precision: target tokens/s of the recipe's real batches, medians of interleaved rounds."""
    trainers = {p: _trainer(real, p) for p in PRECISIONS}
    rates: dict[str, list[float]] = {p: [] for p in PRECISIONS}
    tokens: dict[str, int] = dict.fromkeys(PRECISIONS, 0)
    try:
        for r in range(real.warmup + real.repeats):
            for precision, trainer in trainers.items():
                start, n = time.perf_counter(), 0
                for _ in range(real.steps):
                    n += trainer.step()["tokens"]
                if r >= real.warmup:
                    rates[precision].append(n / (time.perf_counter() - start))
                    tokens[precision] += n
    finally:
        for trainer in trainers.values():
            trainer.lock.release()
    any_trainer = next(iter(trainers.values()))
    base = {"part": "train-real", "shape": f"real {any_trainer.spec.name}", "device": "cpu",
            "batch_tokens": any_trainer.cfg.batch_tokens, "steps_per_round": real.steps, "impl": "tbuild"}
    return [{**base, "precision": p if p == "fp32" else f"auto: {trainers[p].policy.precision}",
             "tokens_per_s": statistics.median(rates[p]), "rounds": rates[p], "target_tokens": tokens[p],
             **({"note": trainers[p].policy.note} if p == "auto" and trainers[p].policy.note else {})}
            for p in PRECISIONS]
