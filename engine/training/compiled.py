"""torch.compile of the training model (``train.compile``): whether it pays, in which mode, and how many
graphs it has built.

``auto`` compiles on CUDA for runs long enough to repay the compilation (about a minute), and never on a
CPU (inductor's C++ takes minutes to build there and the steps are matmul-bound). A model whose step is
too small to keep a GPU busy (every kernel a few microseconds: the GPU waits for the host to launch
them) is compiled with CUDA graphs (``reduce-overhead``): one launch replays a whole step. The graphs
are traced with symbolic shapes, so the few bucketed batch shapes of an epoch (``data/batches.py``)
share them; dynamo's recompile limit bounds their number, and ``graphs()`` counts them.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

import torch
import torch._dynamo
from torch import nn

AUTO_MIN_STEPS = 2000  # auto compiles runs of at least this many steps (or with no step limit)
LAUNCH_BOUND_FLOPS = 2e12  # below this many model FLOPs per step a GPU step is launch-bound: CUDA graphs pay
GRAPH_LIMIT = 8  # graphs per compiled function at most; past it a new shape runs uncompiled (dynamo's rule)


@dataclass(frozen=True)
class CompilePlan:
    """Whether and how the training model is compiled, and why, in words."""

    mode: str | None  # torch.compile's mode ("default" or "reduce-overhead"); None: not compiled
    why: str

    @property
    def on(self) -> bool:
        return self.mode is not None

    @property
    def cuda_graphs(self) -> bool:
        return self.mode == "reduce-overhead"


def compile_plan(setting: bool | str, device: torch.device, *, params: int, batch_tokens: int,
                 max_steps: int | None) -> CompilePlan:
    """The plan for ``train.compile`` = ``setting`` (True, False or "auto") on ``device``, for a model of
    ``params`` parameters stepping on ``batch_tokens`` tokens, for at most ``max_steps`` steps."""
    if setting is False:
        return CompilePlan(None, "compile off (set in the spec)")
    if setting == "auto":
        if device.type != "cuda":
            return CompilePlan(None, "compile auto → off (a CPU: compiling costs minutes and the steps are "
                                     "matmul-bound; train.compile=true to compile anyway)")
        if importlib.util.find_spec("triton") is None:
            return CompilePlan(None, "compile auto → off (torch.compile on CUDA needs triton, not installed)")
        if max_steps is not None and max_steps < AUTO_MIN_STEPS:
            return CompilePlan(None, f"compile auto → off ({max_steps:,} steps do not repay the compilation; "
                                     f"auto compiles runs of {AUTO_MIN_STEPS:,} steps or more)")
    flops = 6 * params * batch_tokens  # forward and backward matmuls per step (Kaplan et al. 2020)
    chosen = "auto → on" if setting == "auto" else "on (set in the spec)"
    if device.type == "cuda" and flops < LAUNCH_BOUND_FLOPS:
        return CompilePlan("reduce-overhead", f"compile {chosen}, with CUDA graphs ({flops / 1e12:.2g} TFLOP a "
                                              f"step is launch-bound: one graph launch replays it)")
    return CompilePlan("default", f"compile {chosen}")


def compile_model(model: nn.Module, *, mode: str = "default", backend: str = "inductor") -> nn.Module:
    """The model compiled once for every batch shape: ``dynamic=True`` traces batch and lengths as
    symbols, so a new (B, S, T) reuses the graph instead of recompiling (with static shapes every
    new batch shape compiled again, much slower: docs/benchmarks.md); guards on size relations (e.g. S == T, a
    length of 1) add at most a few graphs, and ``GRAPH_LIMIT`` bounds them. The caller keeps ``model``
    for checkpoints: the compiled wrapper's parameter names carry an ``_orig_mod.`` prefix. ``mode``
    applies to inductor only (other backends are for tests)."""
    torch._dynamo.config.recompile_limit = GRAPH_LIMIT
    if backend != "inductor":
        return torch.compile(model, dynamic=True, backend=backend)
    return torch.compile(model, dynamic=True, backend=backend, mode=mode)


def graphs() -> int:
    """The graphs dynamo has compiled in this process so far (all compiled functions)."""
    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


def step_begins(plan: CompilePlan) -> None:
    """Tell the CUDA-graph runtime a new training step starts: the previous step's graph outputs may be
    overwritten from here on (none is kept: the loss sums are copies)."""
    if plan.cuda_graphs:
        torch.compiler.cudagraph_mark_step_begin()
