"""KVBuffer: the same keys/values as concatenating and index-selecting (B, Hkv, L, d) tensors; a reorder
copies only the forks' histories, and attention over its physical rows gives the same outputs."""

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
        k_all, v_all = buf.append(k, v)  # physical order: logical row i at buf.rows[i]
        k_ref, v_ref = torch.cat([k_ref, k], 2), torch.cat([v_ref, v], 2)
        logical = slice(None) if buf.rows is None else buf.rows
        assert torch.equal(k_all[logical], k_ref) and torch.equal(v_all[logical], v_ref)
        assert torch.equal(buf.keys, k_ref) and torch.equal(buf.values, v_ref)
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


def test_a_reorder_copies_only_the_forks() -> None:
    """Each parent's first child keeps its row; only the other children (and a child whose parent lies
    past the new row count) get a history copied; rows that all continue themselves copy nothing."""
    buf = KVBuffer()
    buf.append(torch.randn(8, 1, 3, 2), torch.randn(8, 1, 3, 2))
    move = buf.reorder(torch.arange(8))
    assert move is not None and move.source.numel() == 0 and buf.rows is None
    before = buf.keys.clone()
    index = torch.tensor([0, 0, 1, 3, 4, 4, 4, 6])  # parents 0, 4 fork; 2, 5, 7 die
    move = buf.reorder(index)
    assert move is not None and move.source.tolist() == [0, 4, 4] and sorted(move.target.tolist()) == [2, 5, 7]
    assert torch.equal(buf.keys, before[index])
    before = buf.keys.clone()
    index = torch.tensor([1, 2, 3, 7])  # half the rows leave (a finished sentence); 7 lies past 4
    move = buf.reorder(index)
    assert move is not None and move.source.numel() == 1 and torch.equal(buf.keys, before[index])
    k, _ = buf.append(torch.randn(4, 1, 1, 2), torch.randn(4, 1, 1, 2))
    assert k.size(0) == 4 and torch.equal(buf.keys[:, :, :3], before[index])


def test_random_reorders_copy_forks_and_keep_every_history() -> None:
    torch.manual_seed(1)
    buf, ref = KVBuffer(), torch.empty(12, 2, 0, 4)
    rows = 12
    for _ in range(60):
        k = torch.randn(rows, 2, 1, 4)
        buf.append(k, k + 1)
        ref = torch.cat([ref, k], 2)
        count = rows - int(torch.randint(0, 2, ()).item() and rows > 3)
        index = torch.randint(0, rows, (count,)).sort().values  # beams stay within their sentence order
        parents = buf.rows[index] if buf.rows is not None else index
        move = buf.reorder(index)
        forks = count - int(parents[parents.lt(count)].unique().numel())
        assert move is not None and move.source.numel() == forks
        ref, rows = ref[index], count
        assert torch.equal(buf.keys, ref) and torch.equal(buf.values, ref + 1)
