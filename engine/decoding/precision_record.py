"""Which arithmetic a run decodes with on this CPU, measured once and recorded in the run folder
(``RUN/decode_precision.json``), so that ``decode`` and ``serve`` start at once afterwards.

- **precision** (``decode.precision: auto``): bf16 products (``packed.py``), with float32 logits ("bf16") or
  the output projection in bf16 too (``BF16_LOGITS``), the fastest of them that decodes the valid split at
  least ``MIN_SPEEDUP`` × faster than fp32 **and** keeps its metric (``train.select``'s BLEU, lowercased BLEU
  or chrF; BLEU otherwise) within ``MAX_LOSS`` of fp32's; fp32 otherwise. (Records made before bf16 logits
  were measured have "bf16" alone, which keeps its meaning.) A CPU whose flags show no
  bf16 instructions (``avx512_bf16``, ``amx_bf16``) is not measured: bf16 is emulated there (0.11× fp32 on
  an AMD Zen 3, docs/benchmarks.md).
- **int8** (asked for with ``decode.quantization`` or ``--quantization int8``): the output projection in
  int8 too (``quantize.py``) where its metric stays within ``MAX_LOSS`` of fp32's and it is the faster,
  else int8 layers with float32 logits.

The check decodes the first ``CHECK_LINES`` valid lines with the run's decode settings on one thread,
timed in CPU time, the modes interleaved chunk by chunk (A B, B A, …), so that other work on the machine
changes the comparison as little as it can; a mode that runs under ``GIVE_UP`` × fp32's speed over the
first chunks is dropped there. A valid split under
``MIN_LINES`` lines is too small for a 0.1 difference to mean anything: nothing is measured and fp32
(int8: float32 logits) stays. The record holds the CPU (model, flags, torch, threads) and the weights
(path, size, time) it was made with; another CPU or other weights make it stale, and it is measured again.
The file keeps the last ``KEPT`` such records (``{"entries": [...]}``), so alternating the best checkpoint and
an average (or two CPUs sharing a folder) measures each once.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from sacrebleu.metrics import BLEU, CHRF

from ..data.datasets import read_split
from ..device.policy import BF16_LOGITS
from ..device.precision import cpu_identity, cpu_model_and_flags
from ..errors import TbuildError
from ..files import atomic_write
from ..run.directory import Run
from ..run.weights import file_stamp, weights_files
from .engines import Engine
from .request import DecodeRequest

RECORD_VERSION = 1
CHECK_LINES = 1000  # valid lines decoded per mode, at most
MIN_LINES = 200  # fewer valid lines: no check
CHUNKS = 8  # the lines in this many slices, the modes interleaved over them
MIN_SPEEDUP = 1.1  # bf16 must be clearly faster: not within noise
MAX_LOSS = 0.1  # metric points a faster mode may lose against fp32: "equal quality"
GIVE_UP = 0.7  # a mode slower than this × fp32 over the first two chunks is not measured further
BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # a CPU with either computes bf16 natively
KEPT = 8  # records (weights × CPU) one run's file keeps, the most recent
INT8_LOGITS, FLOAT_LOGITS = "int8", "int8, float32 logits"  # the int8 modes

Load = Callable[[str], Engine]  # mode -> a translator decoding in it
Log = Callable[[str], None]


@dataclass(frozen=True)
class Measured:
    """One mode's valid-split decoding: its metric and seconds."""

    score: float | None  # None: left out after the first chunks (too slow)
    seconds: float  # over all the lines (extrapolated for one left out)


def record_key(run: Run, files: list[Path]) -> dict:
    """What a record depends on: this CPU, the weights files and the architecture."""
    return {"version": RECORD_VERSION, "machine": cpu_identity(), "weights": [file_stamp(p) for p in files],
            "architecture": run.spec.architecture_hash()}


def records(run: Run) -> list[dict]:
    """The records in the run's file, oldest first (a file written before it kept several is one record;
    none when missing or damaged)."""
    try:
        data = json.loads(run.dir.decode_record.read_text())
    except (OSError, ValueError):
        return []
    entries = data.get("entries", [data]) if isinstance(data, dict) else []
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def read_record(run: Run, files: list[Path]) -> dict:
    """The run's record for these weights on this CPU (its ``precision`` and ``int8`` entries: each
    ``chosen``, ``why``, the measurements); empty when missing, damaged or made elsewhere."""
    key = record_key(run, files)
    return next((r for r in reversed(records(run)) if r.get("key") == key), {})


def write_record(run: Run, record: dict) -> None:
    """Keep ``record`` in the run's file, replacing the one of its key; the oldest go past ``KEPT``."""
    others = [r for r in records(run) if r.get("key") != record["key"]]
    data = {"entries": [*others[max(0, len(others) - KEPT + 1):], record]}
    atomic_write(run.dir.decode_record, (json.dumps(data, indent=1, ensure_ascii=False) + "\n").encode())


def recorded(run: Run, files: list[Path], what: str) -> tuple[str, str] | None:
    """(chosen, why) of the record's ``what`` entry ("precision" or "int8"), or None."""
    entry = read_record(run, files).get(what)
    if not isinstance(entry, dict) or not {"chosen", "why"} <= entry.keys():
        return None
    return str(entry["chosen"]), f"{entry['why']}; recorded in {run.dir.decode_record.name}"


def bf16_native() -> str | None:
    """None where this CPU computes bf16 natively (or its flags are unknown); else why not."""
    model, flags = cpu_model_and_flags()
    if not flags or flags & set(BF16_FLAGS):
        return None
    return f"{model} has no bf16 instructions ({', '.join(BF16_FLAGS)}): bf16 would be emulated, far slower"


def ensure_record(run: Run, what: str, load: Load, *, checkpoint: Path | None = None, average: int | None = None,
                  notify: Log = lambda _: None, metric: CheckMetric | None = None) -> None:
    """Measure and record ``what`` ("precision" or "int8") for the run on this CPU unless its record has it
    (module docstring); ``load(mode)`` gives a translator decoding in that mode ("fp32", "bf16", or an
    int8 mode); ``metric``: the task's (default: a translation's, ``score_of``). A folder that cannot be written
    is reported: the check runs again next time."""
    metric = metric or score_of(run)
    files = weights_files(run, checkpoint=checkpoint, average=average)
    record = read_record(run, files)
    if what in record:
        return
    sources, references = valid_lines(run)
    if len(sources) < MIN_LINES:
        return
    not_native = bf16_native() if what == "precision" else None
    if not_native is not None:
        entry = {"chosen": "fp32", "why": not_native}
    else:
        modes = ["fp32", "bf16", BF16_LOGITS] if what == "precision" else ["fp32", FLOAT_LOGITS, INT8_LOGITS]
        notify(f"checking {' and '.join(modes[1:])} against fp32 on {len(sources)} valid lines, once for this run "
               f"on this CPU (recorded in {run.dir.decode_record})")
        measured = compare(run, modes, load, sources, references, metric)
        entry = choose(what, measured, metric.higher) | {"measured": {m: vars(v) for m, v in measured.items()}}
    entry |= {"lines": len(sources), "when": time.strftime("%Y-%m-%d %H:%M:%S"), "load": _load()}
    record = {"key": record_key(run, files), **read_record(run, files), what: entry}
    try:
        write_record(run, record)
    except OSError as e:
        notify(f"warning: could not record the decoding check in {run.dir.decode_record} ({e.strerror}): "
               "it runs again next time")


def valid_lines(run: Run) -> tuple[list[str], list[str]]:
    """The first ``CHECK_LINES`` valid sources and references (none without a readable valid split)."""
    if run.spec.data.valid is None:
        return [], []
    try:
        sources, references = read_split(run.spec.data, "valid", lambda _: None)
    except (TbuildError, OSError):
        return [], []
    return sources[:CHECK_LINES], references[:CHECK_LINES]


def compare(run: Run, modes: list[str], load: Load, sources: list[str], references: list[str],
            metric: CheckMetric) -> dict[str, Measured]:
    """Each mode's metric and decoding seconds on the lines, interleaved chunk by chunk (the first mode,
    fp32, the reference); a mode under ``GIVE_UP`` × fp32's speed after two chunks is left out."""
    request = DecodeRequest.of(run.spec.decode)
    translators = {mode: load(mode) for mode in modes}
    with one_thread():
        outputs, seconds, done = _interleave(translators, modes, request, sources)
    return {m: Measured(metric.score(texts, references[:done]) if len(texts) == done else None,  # dropped: no score
                        seconds[m] * done / len(texts)) for m, texts in outputs.items()}


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """torch on one thread, then back to what it was: the check's CPU time is the work itself, which other
    processes on the machine barely change (wall time on shared cores did: 10 to 78 s for one decode)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _interleave(translators: dict[str, Engine], modes: list[str], request: DecodeRequest, sources: list[str]
                ) -> tuple[dict[str, list[str]], dict[str, float], int]:
    """Each mode's outputs and CPU seconds over the lines, chunk by chunk in alternating order; the lines
    done by the modes kept to the end."""
    outputs: dict[str, list[str]] = {mode: [] for mode in modes}
    seconds = dict.fromkeys(modes, 0.0)
    size = -(-len(sources) // CHUNKS)
    done = 0
    for i in range(0, len(sources), size):
        chunk = sources[i:i + size]
        for mode in (modes if i // size % 2 == 0 else modes[::-1]):
            translator = translators[mode]
            start = time.thread_time()
            results = translator.translate(chunk, request)
            seconds[mode] += time.thread_time() - start
            outputs[mode] += [translator.tokenizer.decode(h[0].tokens) if h else "" for h in results]
        done = i + len(chunk)
        if i // size == 1:  # after two chunks: drop what is far slower than fp32
            slow = [m for m in modes[1:] if seconds[m] * GIVE_UP > seconds["fp32"]]
            modes = [m for m in modes if m not in slow]
            if len(modes) == 1:
                break
    return outputs, seconds, done


@dataclass(frozen=True)
class CheckMetric:
    """What a decoding check compares the modes by: outputs against references (``score``) and whether a
    higher score is better (a task's error rate: lower). A task gives its own (``Task.check_metric``)."""

    score: Callable[[list[str], list[str]], float]
    higher: bool = True


def score_of(run: Run) -> CheckMetric:
    """A translation's validation metric of outputs against references: ``train.select``'s when it decodes text
    (bleu, bleu_lowercase, chrf), sacreBLEU BLEU otherwise."""
    metric = run.spec.train.select.metric
    scorer = {"bleu_lowercase": BLEU(lowercase=True), "chrf": CHRF()}.get(metric, BLEU())
    return CheckMetric(lambda hyps, refs: scorer.corpus_score(hyps, [refs]).score)


def choose(what: str, measured: dict[str, Measured], higher: bool = True) -> dict:
    """The chosen mode and why: the fastest candidate within ``MAX_LOSS`` of fp32's metric (``higher``: whether a
    higher one is better; bf16 also at least ``MIN_SPEEDUP`` × fp32); else fp32 (precision) or float32 logits
    (int8)."""
    base = measured["fp32"]
    fallback = "fp32" if what == "precision" else FLOAT_LOGITS
    assert base.score is not None  # the reference always decodes every line
    candidates = [m for m, v in measured.items() if m != "fp32" and v.score is not None
                  and (v.score >= base.score - MAX_LOSS if higher else v.score <= base.score + MAX_LOSS)
                  and (what != "precision" or base.seconds >= MIN_SPEEDUP * v.seconds)]
    chosen = min(candidates, key=lambda m: measured[m].seconds) if candidates else fallback
    shown = [m for m in measured if m != "fp32"]
    facts = ", ".join(f"{m} {base.seconds / measured[m].seconds:.2f}× fp32's speed, " + _score(measured[m].score)
                      for m in shown)
    return {"chosen": chosen, "why": f"valid split: {facts} against fp32's {base.score:.2f}"}


def _score(score: float | None) -> str:
    return "too slow to finish" if score is None else f"score {score:.2f}"


def _load() -> float | None:
    """The machine's load average over the last minute, kept beside the timings (None where unknown)."""
    with contextlib.suppress(OSError, AttributeError):
        return round(os.getloadavg()[0], 2)
    return None
