"""R-Drop (train.rdrop; Liang et al. 2021): the consistency term against its definition, the step's loss (the
task's, which the trainer asks) against eq. 3 on two passes by hand, the spec check, and a training run through
the CLI."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from typer.testing import CliRunner

from tbuild.builder.loader import SpecError, load_spec
from tbuild.cli.app import app
from tbuild.engine.data.batches import IGNORED
from tbuild.engine.device.policy import Policy
from tbuild.engine.loss import label_smoothed_nll, rdrop_kl
from tbuild.engine.tasks.base import Task
from tests.conftest import tiny_train_spec


def kl(p: torch.Tensor, q: torch.Tensor) -> float:
    """KL(p‖q) of two probability vectors, by its definition Σ p log(p/q) (0 log 0 = 0)."""
    return float(sum(pi * torch.log(pi / qi) for pi, qi in zip(p, q, strict=True) if pi > 0))


def test_the_symmetric_kl_is_its_definition() -> None:
    gen = torch.Generator().manual_seed(0)
    first, second = torch.randn(2, 3, 5, generator=gen), torch.randn(2, 3, 5, generator=gen)
    keep = torch.tensor([[True, True, False], [True, False, False]])
    want = 0.0
    for b, t in keep.nonzero().tolist():
        p, q = first[b, t].softmax(-1), second[b, t].softmax(-1)
        want += 0.5 * (kl(p, q) + kl(q, p))
    assert float(rdrop_kl(first, second, keep)) == pytest.approx(want, rel=1e-5)
    first[..., 0] = second[..., 0] = -torch.inf  # a row no pass scores: no NaN
    assert torch.isfinite(rdrop_kl(first, second, keep))
    assert float(rdrop_kl(first, first, keep)) == pytest.approx(0.0, abs=1e-6)


def test_the_steps_loss_is_eq_3() -> None:
    """The batch goes through once as both copies; the loss is the two passes' mean plus α/2 times their
    symmetric KL (eq. 3 halved, as fairseq's criterion normalises by the tokens of both copies)."""
    gen = torch.Generator().manual_seed(1)
    src, tgt_in = torch.randint(4, 9, (2, 4), generator=gen), torch.randint(4, 9, (2, 3), generator=gen)
    tgt_out = torch.tensor([[5, 6, 3], [7, 3, IGNORED]])
    passes = torch.randn(4, 3, 9, generator=gen)  # what "dropout" makes of each row of the doubled batch

    def module(s: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        assert torch.equal(s, torch.cat([src, src])) and torch.equal(t, torch.cat([tgt_in, tgt_in]))
        return passes

    alpha, eps = 2.0, 0.1
    spec = SimpleNamespace(train=SimpleNamespace(rdrop=alpha, label_smoothing=eps))
    loss, nll = Task().loss(module, (src, tgt_in, tgt_out), spec, Policy(torch.device("cpu")))  # type: ignore[arg-type]
    one, nll_one, _ = label_smoothed_nll(passes[:2], tgt_out, eps)
    two, nll_two, _ = label_smoothed_nll(passes[2:], tgt_out, eps)
    consistency = rdrop_kl(passes[:2], passes[2:], tgt_out.ne(IGNORED))
    assert float(loss) == pytest.approx(float((one + two) / 2 + alpha / 2 * consistency), rel=1e-6)
    assert float(nll) == pytest.approx(float((nll_one + nll_two) / 2), rel=1e-6)


def test_rdrop_without_dropout_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"model": {"dropout": {"residual": 0.0, "embedding": 0.0}},
                                    "train": {"rdrop": 1.0}}))
    with pytest.raises(SpecError, match=r"train\.rdrop.*every model\.dropout rate is 0"):
        load_spec(spec)


def test_a_run_trains_with_rdrop(tiny_corpus: Path, tmp_path: Path) -> None:
    spec = tiny_train_spec(tiny_corpus, tmp_path / "run", rdrop=1.0, max_steps=4)
    spec["model"]["dropout"] = {"residual": 0.1}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = CliRunner().invoke(app, ["train", str(tmp_path / "spec.yaml")])
    assert result.exit_code == 0, result.output
    assert "stopped at step 4" in result.output
