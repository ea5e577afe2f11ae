"""``--compile``: the incremental decoder step through torch.compile.

One decoder step is a few dozen small operators per layer; at Multi30k's size their Python and
dispatch overhead is a large share of a step on a CPU. Compiled (inductor, ``dynamic=True``: batch
size and cache length are symbols, so a handful of graphs cover every shape a search meets), the
step runs as generated C++ kernels. Same tokens as eager decoding (tests/engine/decoding/
test_compiled.py); the first batches pay the compilation (less when inductor's on-disk cache holds
the graphs), so it pays off for long inputs and servers, not for a few lines. Figures:
docs/benchmarks.md."""

from __future__ import annotations

import torch


def compile_decoder(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with its ``decode`` replaced by the compiled one (in place; returned for chaining)."""
    model.decode = torch.compile(model.decode, dynamic=True)
    return model
