"""Training throughput of tbuild and its peers on the same batches: one worker process per
implementation (``train_worker``), driven in interleaved rounds (tbuild, torch, HF, tbuild, ...)
so that other load on the machine hits them alike; the first rounds are warm-up and not counted.

Per implementation: median target tokens/s over the timed rounds, the model FLOPs per second over
the MFU peak, and the peak memory. Ratios to a peer are medians of the per-round ratios of step
times, each round on one batch for all."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .flops import StepFlops
from .peers import marian_available
from .workload import Workload, corpus, tbuild_spec

REPO = Path(__file__).resolve().parents[1]
IMPLS = {"tbuild": "tbuild", "torch": "torch.nn.Transformer", "hf": "HF MarianMTModel"}


class Worker:
    """A ``train_worker`` process for one implementation."""

    def __init__(self, impl: str, job: dict) -> None:
        self.impl, self.error = impl, None
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        # its stderr: a pipe nobody reads could fill and block it; closed in close()
        self.log = tempfile.TemporaryFile("w+")  # noqa: SIM115
        command = [sys.executable, "-m", "benchmarks.train_worker", json.dumps({**job, "impl": impl})]
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True, cwd=REPO, env=env)

    def ask(self, command: str | None) -> dict:
        """Send ``command`` (None: just read) and return the answer; a failed worker answers its error."""
        if self.error is not None:
            return {"error": self.error}
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            if command is not None:
                self.proc.stdin.write(command + "\n")
                self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        answer = json.loads(line) if line else {"error": self._stderr_tail()}
        if "error" in answer:
            self.error = answer["error"]
        return answer

    def _stderr_tail(self) -> str:
        self.proc.wait()
        self.log.seek(0)
        lines = self.log.read().strip().splitlines()
        return f"worker exited with code {self.proc.returncode}: {lines[-1] if lines else 'no output'}"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()


@dataclass(frozen=True)
class TrainRun:
    """One comparison: a workload at one precision on one device."""

    work: Workload
    precision: str
    device: str
    threads: int
    warmup: int
    repeats: int
    settings: dict  # TrainSpec overrides for tbuild (e.g. pad_multiple, compile on a GPU)
    peak_gflops: float
    peak_source: str
    profile: int = 0  # steps profiled after the timed rounds (0: none)
    profile_dir: Path = Path("bench-profile")


def run_training(run: TrainRun, impls: list[str]) -> list[dict]:
    """One row per implementation (tbuild first), timed in interleaved rounds."""
    if "hf" in impls and marian_available() is not None:
        impls = [i for i in impls if i != "hf"]
    job = {"workload": run.work.to_json(), "precision": run.precision, "device": run.device,
           "threads": run.threads, "settings": run.settings}
    workers = [Worker(impl, job) for impl in impls]
    try:
        for w in workers:
            w.ask(None)  # ready
        times: dict[str, list[float]] = {w.impl: [] for w in workers}
        for r in range(run.warmup + run.repeats):
            for w in workers:
                answer = w.ask(f"step {r}")
                if "seconds" in answer and r >= run.warmup:
                    times[w.impl].append(answer["seconds"])
        if run.profile:
            _profiles(run, workers)
        memory = {w.impl: w.ask("end").get("peak_memory_mib") for w in workers}
        errors = {w.impl: w.error for w in workers}
    finally:
        for w in workers:
            w.close()
    return _rows(run, times, memory, errors)


def _profiles(run: TrainRun, workers: list[Worker]) -> None:
    """Each implementation's ``run.profile`` further steps under torch.profiler: its table on stderr, its trace
    in ``run.profile_dir`` (named by implementation, shape and precision)."""
    for w in workers:
        name = f"{w.impl}-{run.work.shape.name}-{run.device}-{run.precision}"
        answer = w.ask(f"profile {run.profile} {run.warmup + run.repeats} {run.profile_dir / name}")
        print(f"== {IMPLS[w.impl]} ({run.work.shape.name}, {run.device} {run.precision})", file=sys.stderr)
        for line in answer.get("profile", [f"no profile: {answer.get('error', w.error)}"]):
            print(line, file=sys.stderr, flush=True)


def _rows(run: TrainRun, times: dict[str, list[float]], memory: dict, errors: dict) -> list[dict]:
    pairs, batches = corpus(run.work)
    timed = batches[run.warmup:]
    flops = StepFlops(tbuild_spec(run.work.shape, run.work.vocab).spec)
    tokens = [int(pairs.tgt_lengths[b].sum()) for b in timed]
    step_flops = [flops.step(pairs.src_lengths[b].tolist(), pairs.tgt_lengths[b].tolist()) for b in timed]
    rows = []
    for impl, seconds in times.items():
        row = {"part": "train", "shape": run.work.shape.name, "device": run.device, "precision": run.precision,
               "impl": impl, "name": IMPLS[impl], "rounds": len(seconds)}
        if errors[impl] is not None or len(seconds) < len(timed):
            rows.append({**row, "error": errors[impl] or "a step failed"})
            continue
        achieved = statistics.median(f / s for f, s in zip(step_flops, seconds, strict=True))
        rows.append({**row, "tokens_per_s": statistics.median(t / s for t, s in zip(tokens, seconds, strict=True)),
                     "step_seconds": statistics.median(seconds), "model_tflops": achieved / 1e12,
                     "mfu": achieved / (run.peak_gflops * 1e9), "mfu_peak_gflops": run.peak_gflops,
                     "mfu_peak": run.peak_source, "peak_memory_mib": memory[impl], "seconds": seconds})
    ours = next((r for r in rows if r["impl"] == "tbuild" and "seconds" in r), None)
    if ours is not None:
        ours["ratios"] = {r["impl"]: statistics.median(p / o for o, p in zip(ours["seconds"], r["seconds"],
                                                                             strict=True))
                          for r in rows if r is not ours and "seconds" in r}
    return rows
