"""python -m benchmarks.crf_tagger: a linear-chain CRF part-of-speech tagger, the feature model a neural tagger
is measured against, trained and scored on exactly the files and split of a tbuild tagger spec (by default
specs/examples/graphs/pos-tagger.yaml: NLTK's treebank sample, files 0001-0159 train, 0160-0179 valid,
0180-0199 test, -NONE- removed), read by tbuild's own reader. Features per word: the word, its lowercase,
prefixes and suffixes of 1-4 characters, its shape, whether it is digits, upper case or title case, and the
lowercase words one and two to each side. CRFsuite (python-crfsuite, the "crf" extra) trains it with L-BFGS
and L1 + L2 penalties c1 and c2, chosen on the validation split from a grid; test is scored once, with the
chosen model. Accuracy overall and on the words seen in training or not (as ``tbuild evaluate`` splits
them), beside the most-frequent-tag baseline, and the training seconds of each model on this CPU."""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tbuild.builder import load_spec
from tbuild.builder.loader import SpecError
from tbuild.engine.data.word_labels import Tagged, read_tagged
from tbuild.engine.decoding.tagger import Baseline
from tbuild.engine.errors import TbuildError
from tbuild.engine.extras import install_hint

from .hardware import cpu_info

SPEC = Path("specs/examples/graphs/pos-tagger.yaml")
C1 = (0.05, 0.25)  # the validation grid: L1 penalty ...
C2 = (0.01, 0.1)  # ... and L2 penalty
ITERATIONS = 100  # L-BFGS iterations at most (CRFsuite also stops once the objective stops improving)
AFFIXES = range(1, 5)
NEIGHBOURS = (-2, -1, 1, 2)


def shape(word: str) -> str:
    """The word's shape with runs collapsed: ``Xx``, ``d.d``, ``X-d``, ``x``."""
    mapped = "".join("X" if c.isupper() else "x" if c.islower() else "d" if c.isdigit() else c for c in word)
    return re.sub(r"(.)\1+", r"\1", mapped)


def word_features(words: list[str], i: int) -> dict[str, str | float]:
    """The features of the sentence's word ``i`` (string values are indicator features ``name:value``)."""
    word = words[i]
    out: dict[str, str | float] = {"bias": 1.0, "w": word, "lw": word.lower(), "shape": shape(word),
                                   "digit": float(word.isdigit()), "upper": float(word.isupper()),
                                   "title": float(word.istitle())}
    for n in AFFIXES:
        out[f"p{n}"], out[f"s{n}"] = word[:n], word[-n:]
    for d in NEIGHBOURS:
        j = i + d
        out[f"w{d:+d}"] = words[j].lower() if 0 <= j < len(words) else ("<s>" if j < 0 else "</s>")
    return out


def sentence_features(words: list[str]) -> list[dict[str, str | float]]:
    return [word_features(words, i) for i in range(len(words))]


@dataclass(frozen=True)
class Fitted:
    """One trained CRF: its penalties, model file, training seconds (wall and CPU) and validation accuracy."""

    c1: float
    c2: float
    path: Path
    seconds: float
    cpu_seconds: float
    iterations: int
    valid: float


def train(split: Tagged, c1: float, c2: float, iterations: int, path: Path) -> tuple[float, float, int]:
    """Train a CRF on ``split`` into ``path``: (seconds, CPU seconds, iterations run). CRFsuite trains on one
    thread, so its CPU seconds are its time on a core of its own (the seconds count waits on a shared one)."""
    import pycrfsuite

    trainer = pycrfsuite.Trainer(verbose=False)
    for words, tags in zip(split.words, split.tags, strict=True):
        trainer.append(sentence_features(words), tags)
    trainer.set_params({"c1": c1, "c2": c2, "max_iterations": iterations,
                        "feature.possible_transitions": True})
    start, cpu = time.perf_counter(), time.process_time()
    trainer.train(str(path))
    return time.perf_counter() - start, time.process_time() - cpu, trainer.logparser.last_iteration["num"]


def tag(path: Path, split: Tagged) -> list[list[str]]:
    import pycrfsuite

    tagger = pycrfsuite.Tagger()
    tagger.open(str(path))
    try:
        return [tagger.tag(sentence_features(words)) for words in split.words]
    finally:
        tagger.close()


def accuracy(split: Tagged, predicted: list[list[str]]) -> float:
    pairs = [(g, p) for gold, guess in zip(split.tags, predicted, strict=True) for g, p in zip(gold, guess,
                                                                                               strict=True)]
    return sum(g == p for g, p in pairs) / len(pairs)


def head(split: Tagged, sentences: int | None) -> Tagged:
    """The split's first ``sentences`` sentences (all: None)."""
    n = sentences or len(split.words)
    return Tagged(split.words[:n], split.tags[:n], split.lines[:n], split.tags_file)


def run(spec: Path, c1s: tuple[float, ...], c2s: tuple[float, ...], iterations: int,
        sentences: int | None = None, log=lambda line: None) -> dict:  # noqa: ANN001
    """Train one CRF per (c1, c2) on the spec's train split, choose by validation accuracy, score test once."""
    data = load_spec(spec).spec.data
    splits = {s: head(read_tagged(data, s), sentences) for s in ("train", "valid", "test")}
    log(" ".join(f"{s} {len(t.words)} sentences, {sum(map(len, t.words))} words;" for s, t in splits.items()))
    fitted = []
    with tempfile.TemporaryDirectory() as folder:
        for c1 in c1s:
            for c2 in c2s:
                path = Path(folder) / f"crf-{c1}-{c2}.crfsuite"
                seconds, cpu, done = train(splits["train"], c1, c2, iterations, path)
                valid = accuracy(splits["valid"], tag(path, splits["valid"]))
                fitted.append(Fitted(c1, c2, path, seconds, cpu, done, valid))
                log(f"c1 {c1} c2 {c2}: valid {valid:.2%}, {seconds:.1f} s ({cpu:.1f} s CPU), {done} iterations")
        best = max(fitted, key=lambda f: f.valid)
        predicted = tag(best.path, splits["test"])
    baseline = Baseline.of(splits["train"])
    known, unknown = baseline.by_seen(splits["test"], predicted)
    return {"spec": str(spec), "cpu_model": cpu_info()[0], "threads": 1,  # CRFsuite trains on one thread
            "words": {s: sum(map(len, t.words)) for s, t in splits.items()},
            "grid": [{"c1": f.c1, "c2": f.c2, "valid": f.valid, "train_seconds": round(f.seconds, 2),
                      "train_cpu_seconds": round(f.cpu_seconds, 2), "iterations": f.iterations} for f in fitted],
            "chosen": {"c1": best.c1, "c2": best.c2, "max_iterations": iterations},
            "valid": best.valid, "test": accuracy(splits["test"], predicted),
            "train_seconds": round(best.seconds, 2), "train_cpu_seconds": round(best.cpu_seconds, 2),
            "known": known, "unknown": unknown,
            "baseline": {"valid": baseline.accuracy(splits["valid"]), "test": baseline.accuracy(splits["test"])}}


def floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not comma-separated numbers: {text!r}") from None


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.crf_tagger", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", type=Path, default=SPEC, help=f"a tagger spec: its data (default {SPEC})")
    parser.add_argument("--c1", type=floats, default=C1, help="L1 penalties to try, comma-separated "
                        f"(default {','.join(map(str, C1))})")
    parser.add_argument("--c2", type=floats, default=C2, help="L2 penalties to try, comma-separated "
                        f"(default {','.join(map(str, C2))})")
    parser.add_argument("--iterations", type=int, default=ITERATIONS, help="L-BFGS iterations at most "
                        f"(default {ITERATIONS})")
    parser.add_argument("--sentences", type=int, help="each split's first N sentences only (a smoke run)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    return parser.parse_args(argv)


def report(result: dict) -> str:
    known, unknown, chosen = result["known"], result["unknown"], result["chosen"]
    return "\n".join([
        f"CRF (c1 {chosen['c1']}, c2 {chosen['c2']}, chosen on validation): valid {result['valid']:.2%}, "
        f"test {result['test']:.2%} (most frequent tag: {result['baseline']['valid']:.2%}, "
        f"{result['baseline']['test']:.2%})",
        f"test known words {known['accuracy']:.2%} of {known['words']}, unknown words "
        + (f"{unknown['accuracy']:.2%} of {unknown['words']}" if unknown["words"] else "none"),
        f"trained in {result['train_seconds']:.1f} s ({result['train_cpu_seconds']:.1f} s of CPU) on one thread of "
        f"{result['cpu_model']}"])


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        import pycrfsuite  # noqa: F401
    except ImportError:
        print(f"python -m benchmarks.crf_tagger needs python-crfsuite: {install_hint('tbuild[crf]')}", file=sys.stderr)
        return 2
    try:
        result = run(args.spec, args.c1, args.c2, args.iterations, args.sentences,
                     log=lambda line: print(line, file=sys.stderr))
    except (SpecError, TbuildError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(report(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
