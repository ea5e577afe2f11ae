"""One implementation's training steps in a process of its own, so that the peak memory it reports
is its own. The parent (``training.py``) drives it over stdin/stdout, one JSON line each way: it
answers ``{"ready": ...}`` once set up, ``step I`` runs one optimizer step on batch I and answers its
seconds, ``end`` answers the peak memory and exits.

tbuild's step is ``Trainer.step`` itself, fed the benchmark's batches: the model, optimizer,
autocast policy and loss are what `tbuild train` builds (a ``Trainer`` made from the benchmark's pairs,
in a scratch run directory). The peers run the textbook PyTorch step: Adam (β 0.9/0.98, ε 1e-9, fused on
CUDA as tbuild's), ``F.cross_entropy`` with label smoothing 0.1 under the same autocast."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from tbuild.components.specs.special import DEFAULT
from tbuild.engine.data.batches import IGNORED, collate
from tbuild.engine.data.pairs import Pairs
from tbuild.engine.device.policy import Policy, choose_policy
from tbuild.engine.device.process import configure_process
from tbuild.engine.run.directory import RunDir
from tbuild.engine.start.values import Initial
from tbuild.engine.tasks.registry import task_of
from tbuild.engine.training.profile import profile_calls
from tbuild.engine.training.trainer import Trainer, TrainingInputs

from .peers import MarianLogits, TorchTransformer, marian_model
from .workload import Workload, corpus, tbuild_spec

SEED = 1


class Replay:
    """Stands in for the trainer's ``BatchCursor``: the benchmark's batches in order (the parent asks for
    them in order, so the trainer's feed may collate the next one ahead, as in training)."""

    def __init__(self, batches: list[np.ndarray]) -> None:
        self.batches, self.epoch, self.index = batches, 0, 0

    def next(self) -> np.ndarray:
        batch = self.batches[self.index % len(self.batches)]
        self.index += 1
        return batch


def tbuild_step(work: Workload, pairs: Pairs, batches: list[np.ndarray], policy: Policy,
                settings: dict) -> Callable[[int], None]:
    """``Trainer.step`` on batch i of the benchmark's batches, with `tbuild train`'s model and optimizer."""
    loaded = tbuild_spec(work.shape, work.vocab, {"precision": policy.precision, "seed": SEED, **settings})
    inputs = TrainingInputs(loaded.spec, None, pairs, None, None, Initial(),  # type: ignore[arg-type]  # no tokenizer
                            task_of(loaded.spec))
    run = RunDir(Path(tempfile.mkdtemp(prefix="tbuild-bench-")))  # what the trainer writes as it starts
    trainer = Trainer(inputs, run, lambda kind, data: None, policy=policy)
    shutil.rmtree(run.path)  # steps write nothing there
    replay = Replay(batches)
    trainer.read_from(replay)  # type: ignore[arg-type]
    trainer.model.train()

    taken = iter(range(1 << 62))

    def step(i: int) -> None:
        if i != (expected := next(taken) % len(batches)):
            raise ValueError(f"tbuild's benchmark steps take the batches in order: asked for {i}, not {expected}")
        trainer.step()

    return step


def peer_step(model: torch.nn.Module, pairs: Pairs, batches: list[np.ndarray],
              policy: Policy) -> Callable[[int], None]:
    """The plain PyTorch training step of ``model`` ((src, tgt_in) -> logits) on batch i."""
    model.to(policy.device).train()
    fused = True if policy.device.type == "cuda" else None
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=fused)

    def step(i: int) -> None:
        batch = batches[i]
        optimizer.zero_grad(set_to_none=True)
        ntok = int(pairs.tgt_lengths[batch].sum())
        src, tgt_in, tgt_out, _ = (policy.to_device(t) for t in collate(pairs, batch, DEFAULT))
        with policy.autocast():
            logits = model(src, tgt_in)  # a peer tells its padding by PAD ids, as such code does
            loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=IGNORED,
                                   label_smoothing=0.1, reduction="sum")
        (loss / ntok).backward()
        optimizer.step()

    return step


def make_step(job: dict, pairs: Pairs, batches: list[np.ndarray], policy: Policy) -> Callable[[int], None]:
    work = Workload.from_json(job["workload"])
    if job["impl"] == "tbuild":
        return tbuild_step(work, pairs, batches, policy, job["settings"])
    torch.manual_seed(SEED)
    if job["impl"] == "torch":
        return peer_step(TorchTransformer(work.shape, work.vocab), pairs, batches, policy)
    return peer_step(MarianLogits(marian_model(work.shape, work.vocab)), pairs, batches, policy)


def peak_memory_mib(device: torch.device) -> float:
    """CUDA: the most memory torch allocated; CPU: the process's peak resident set (VmHWM)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    with open("/proc/self/status") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    return kib / 1024


def _steps_from(step: Callable[[int], None], first: int, batches: int) -> Callable[[], None]:
    """Calls of ``step`` on batches first, first + 1, ... (wrapping around the ``batches`` there are)."""
    at = iter(range(first, 1 << 62))
    return lambda: step(next(at) % batches)


def serve(job: dict, reply: Callable[[dict], None]) -> None:
    process = configure_process(job["threads"])
    policy = choose_policy(job["precision"], job["device"])
    pairs, batches = corpus(Workload.from_json(job["workload"]))
    step = make_step(job, pairs, batches, policy)
    sync = torch.cuda.synchronize if policy.device.type == "cuda" else (lambda: None)
    reply({"ready": True, "threads": torch.get_num_threads()})
    for done, line in enumerate(sys.stdin, start=1):
        command, *args = line.split()
        if command == "end":
            reply({"peak_memory_mib": round(peak_memory_mib(policy.device), 1)})
            return
        if command == "profile":  # profile N FIRST DIR: N steps from batch FIRST on, trace into DIR
            count, first, out = int(args[0]), int(args[1]), Path(args[2])
            found = profile_calls(_steps_from(step, first, len(batches)), count, out.parent, device=policy.device,
                                  name=out.name)
            reply({"profile": found.lines()})
            continue
        sync()
        start = time.perf_counter()
        step(int(args[0]))
        sync()
        seconds = time.perf_counter() - start
        process.after_step(done)  # the same heap housekeeping for every implementation
        reply({"seconds": seconds})


def main() -> None:
    """Serve the job given as JSON in argv[1]. The replies go to the original stdout; anything a
    library prints goes to stderr instead."""
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    def reply(message: dict) -> None:
        out.write(json.dumps(message) + "\n")
        out.flush()

    try:
        serve(json.loads(sys.argv[1]), reply)
    except Exception as e:  # the parent reports it in the implementation's row
        traceback.print_exc()
        reply({"error": f"{type(e).__name__}: {e}".splitlines()[0]})


if __name__ == "__main__":
    main()
