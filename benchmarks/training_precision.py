"""Training on CPU in fp32 versus bf16 autocast: tokens/s and validation perplexity after the same
number of steps, both measured in this run on the same data, seed and model. Not a test:

    python benchmarks/training_precision.py [--spec specs/multi30k-v1.yaml] [--steps 300] [--threads 2]

Needs Multi30k (TBUILD_DATA_MIRROR or network). Prints medians of the logged tokens/s.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

from tbuild.builder import load_spec
from tbuild.engine.device.process import configure_process
from tbuild.engine.run.directory import read_jsonl
from tbuild.engine.training.run import train_spec


def run(spec: Path, precision: str, steps: int, root: Path, threads: int, tokenizer: Path | None,
        after_step: Callable[[int], None]) -> dict:
    out = root / precision
    overrides = [f"output_dir={out}", f"train.precision={precision}", f"train.max_steps={steps}",
                 "train.max_epochs=null", "train.max_minutes=null", "train.log_every=25",
                 f"train.validate_every={steps}", "train.checkpoint_minutes=null", f"train.threads={threads}"]
    if tokenizer is not None:
        overrides.append(f"data.tokenizer.model={tokenizer}")
    result = train_spec(load_spec(spec, overrides), lambda kind, data: None, after_step=after_step)
    records = read_jsonl(out / "metrics.jsonl")
    valid = read_jsonl(out / "valid.jsonl")[-1]
    return {"tokens_per_s": statistics.median(r["tokens_per_s"] for r in records[1:]),
            "valid_ppl": valid["ppl"], "train_nll": records[-1]["nll"], "seconds": result["elapsed"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=Path("specs/multi30k-v1.yaml"))  # docs/benchmarks.md's
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    process = configure_process(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        fp32 = run(args.spec, "fp32", args.steps, root, args.threads, None, process.after_step)
        bf16 = run(args.spec, "bf16", args.steps, root, args.threads, root / "fp32" / "spm.model",
                   process.after_step)
    print(f"{'':6} {'tokens/s':>10} {'valid ppl':>10} {'train nll':>10} {'seconds':>8}")
    for name, r in (("fp32", fp32), ("bf16", bf16)):
        print(f"{name:6} {r['tokens_per_s']:10,.0f} {r['valid_ppl']:10.2f} {r['train_nll']:10.3f} {r['seconds']:8.0f}")
    print(f"bf16/fp32 speed {bf16['tokens_per_s'] / fp32['tokens_per_s']:.2f}x, "
          f"valid ppl ratio {bf16['valid_ppl'] / fp32['valid_ppl']:.3f} after {args.steps} steps")


if __name__ == "__main__":
    main()
