"""KVBuffer: the same keys/values as concatenating and index-selecting (B, Hkv, L, d) tensors."""

from __future__ import annotations

import torch

from tbuild.components.kv_cache import GROW, KVBuffer


def test_buffer_equals_cat_and_index_select_across_growth_and_shrinking_rows() -> None:
    torch.manual_seed(0)
    buf, k_ref, v_ref = KVBuffer(), torch.empty(6, 2, 0, 3), torch.empty(6, 2, 0, 5)
    rows = 6
    for step in range(GROW + 10):  # past the first capacity, so the buffers grow once
        t = 3 if step == 0 else 1  # a prefix of several positions, then one at a time
        k, v = torch.randn(rows, 2, t, 3), torch.randn(rows, 2, t, 5)
        k_all, v_all = buf.append(k, v)
        k_ref, v_ref = torch.cat([k_ref, k], 2), torch.cat([v_ref, v], 2)
        assert torch.equal(k_all, k_ref) and torch.equal(v_all, v_ref)
        if step % 3 == 1:  # reorder, dropping a row now and then (finished sentences leave)
            index = torch.randint(0, rows, (rows - (step % 2 and rows > 2),))
            buf.reorder(index)
            k_ref, v_ref, rows = k_ref[index], v_ref[index], index.numel()
            assert torch.equal(buf.keys, k_ref) and torch.equal(buf.values, v_ref)
    assert buf.length == GROW + 12


def test_reorder_under_autograd_keeps_the_graph() -> None:
    w = torch.randn(3, requires_grad=True)
    buf = KVBuffer()
    buf.append(torch.ones(2, 1, 1, 3) * w, torch.ones(2, 1, 1, 3) * w)
    buf.reorder(torch.tensor([1, 1, 0]))
    k, _ = buf.append(torch.zeros(3, 1, 1, 3), torch.zeros(3, 1, 1, 3))
    k.sum().backward()
    assert w.grad is not None and torch.equal(w.grad, torch.full((3,), 3.0))
