"""The model FLOPs behind the benchmark's MFU, against counts worked out by hand."""

from __future__ import annotations

from benchmarks.flops import StepFlops
from benchmarks.workload import Shape, tbuild_spec

D, FF, V, H = 8, 16, 20, 2
SHAPE = Shape("test", D, 1, H, FF)


def test_one_pair_by_hand() -> None:
    """One layer each side, source length 3, target length 2, biases not counted."""
    counter = StepFlops(tbuild_spec(SHAPE, V).spec)
    s, t = 3, 2
    attn_proj, ffn = 4 * D * D, 2 * D * FF
    encoder = 2 * (attn_proj + ffn) * s
    cross_kv = 2 * (2 * D * D) * s
    decoder = 2 * (attn_proj + 2 * D * D + ffn + V * D) * t  # self-attention, cross Q and O, FFN, output
    per_key = 2 * H * (D // H + D // H)  # QKᵀ and the weighted sum of V, per query and key
    attention = s * s * per_key + (1 + 2) * per_key + t * s * per_key  # encoder, causal decoder, cross
    assert counter.forward([s], [t]) == encoder + cross_kv + decoder + attention
    assert counter.step([s], [t]) == 3 * counter.forward([s], [t])


def test_batches_add_up() -> None:
    counter = StepFlops(tbuild_spec(SHAPE, V).spec)
    assert counter.forward([3, 5], [2, 4]) == counter.forward([3], [2]) + counter.forward([5], [4])
