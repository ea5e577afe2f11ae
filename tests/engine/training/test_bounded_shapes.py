"""Padded batch shapes change neither the loss nor the gradients; the compiled model gives the same
loss and recompiles a bounded number of times over batches of many shapes."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
import torch._dynamo
from torch import nn

from tbuild.components.specs.special import DEFAULT, EOS
from tbuild.engine.data.batches import Bucketing, collate
from tbuild.engine.data.pairs import Pairs
from tbuild.engine.loss import label_smoothed_nll
from tbuild.engine.training.compiled import compile_model, graphs
from tbuild.engine.training.run import train_spec as train
from tests.conftest import TINY, tiny_model, tiny_train_spec


def random_pairs(n: int, seed: int = 0) -> Pairs:
    rng = random.Random(seed)
    def row() -> list[int]:
        return [rng.randint(4, 39) for _ in range(rng.randint(1, 12))] + [EOS]
    return Pairs(src=[row() for _ in range(n)], tgt=[row() for _ in range(n)])


def loss_and_grads(model: nn.Module, tensors: tuple[torch.Tensor, ...]) -> tuple[float, dict[str, torch.Tensor]]:
    """The training step's loss per target token and its gradients."""
    src, tgt_in, tgt_out, src_pad = tensors
    model.zero_grad(set_to_none=True)
    loss, _, n = label_smoothed_nll(model(src, tgt_in, src_pad), tgt_out, 0.1)
    (loss / n).backward()
    return (loss / n).item(), {k.removeprefix("_orig_mod."): p.grad.clone()  # a compiled wrapper's names
                               for k, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("overrides", [[], ["model.norm_placement=pre"], ["model.attention.kind=relative"],
                                       ["model.positional.kind=learned", "model.max_positions=13"]])
def test_padding_changes_neither_loss_nor_gradients(overrides: list[str]) -> None:
    model = tiny_model(overrides)  # eval mode: no dropout, whose draws depend on the shape
    pairs = random_pairs(13)
    rows = list(range(13))
    loss, grads = loss_and_grads(model, collate(pairs, rows, DEFAULT))
    exact = collate(pairs, rows, DEFAULT)
    padded = collate(pairs, rows, DEFAULT, bucketing=Bucketing(pad_multiple=8, row_steps=4, max_len=13))
    assert padded[0].shape[0] == 14
    assert padded[0].numel() > exact[0].numel() and padded[1].numel() > exact[1].numel()
    padded_loss, padded_grads = loss_and_grads(model, padded)
    assert padded_loss == pytest.approx(loss, abs=1e-5)
    assert grads.keys() == padded_grads.keys()
    for name, g in grads.items():
        torch.testing.assert_close(padded_grads[name], g, atol=1e-5, rtol=1e-5, msg=name)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compiled_model_same_loss_and_gradients_and_bounded_graphs(backend: str) -> None:
    """Over batches of 8 bucketed shapes (at least 6 distinct) the compiled model builds at most 3
    graphs, its loss and gradients equal the eager model's (1e-5), and a second pass over the same
    shapes (after warm-up) builds none. (Backend "eager": dynamo traces and guards as for inductor,
    without generating code; "aot_eager" also traces the backward as inductor does.)"""
    model = tiny_model()
    compiled = compile_model(model, backend=backend)
    pairs = random_pairs(64, seed=1)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    bucketing = Bucketing(pad_multiple=4, row_steps=4)
    shapes = set()
    for round_ in range(2):
        for start, count in [(0, 3), (3, 5), (8, 9), (17, 12), (29, 6), (35, 16), (51, 13), (0, 21)]:
            tensors = collate(pairs, list(range(start, start + count)), DEFAULT, bucketing=bucketing)
            shapes.add(tuple(tensors[0].shape) + (tensors[1].size(1),))
            eager, eager_grads = loss_and_grads(model, tensors)
            loss, grads = loss_and_grads(compiled, tensors)
            assert loss == pytest.approx(eager, abs=1e-5)
            for name, g in eager_grads.items():
                torch.testing.assert_close(grads[name], g, atol=1e-5, rtol=1e-5)
        if round_ == 0:
            warm = graphs()
    assert len(shapes) >= 6
    assert 1 <= warm <= 3
    assert graphs() == warm  # no recompilation after warm-up
    torch._dynamo.reset()


@pytest.mark.slow
def test_inductor_compiles_on_this_machine() -> None:
    """The default backend (generated C++ on CPU: ≈50 s here) gives the eager loss."""
    spec = {**TINY, "model": {**TINY["model"], "encoder": {"layers": 1, "heads": 2, "d_ff": 16},
                              "decoder": {"layers": 1, "heads": 2, "d_ff": 16}}}
    model = tiny_model(spec=spec)
    torch._dynamo.reset()
    tensors = collate(random_pairs(8, seed=2), list(range(8)), DEFAULT, bucketing=Bucketing(pad_multiple=8))
    eager, _ = loss_and_grads(model, tensors)
    assert loss_and_grads(compile_model(model), tensors)[0] == pytest.approx(eager, abs=1e-5)
    torch._dynamo.reset()


def test_trainer_saves_the_uncompiled_parameter_names(tiny_corpus: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A compiled, bucketed run trains and checkpoints the same parameter names as a plain one."""
    from tbuild.builder import load_spec
    from tbuild.engine.run.checkpoint import read_checkpoint
    from tbuild.engine.training import trainer

    monkeypatch.setattr(trainer, "compile_model", lambda m, **_: compile_model(m, backend="eager"))
    names = {}
    for name, extra in (("plain", {}), ("compiled", {"compile": True, "pad_multiple": 8, "row_steps": 4})):
        spec = tiny_train_spec(tiny_corpus, tmp_path / name, max_steps=2, validate_every=2, checkpoint_every=2,
                               **extra)
        assert train(load_spec(spec), lambda kind, data: None)["step"] == 2
        names[name] = set(read_checkpoint(tmp_path / name / "checkpoints" / "step_00000002.safetensors")[0])
    torch._dynamo.reset()
    assert names["compiled"] == names["plain"]
    assert not any("_orig_mod" in n for n in names["compiled"])
