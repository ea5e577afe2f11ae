"""The search's speed-ups change no output: beam search with the self-attention cache copying only the
forks' histories (components/kv_cache.py) gives exactly the tokens, scores and per-token log-probs of
the search that copied every row's history at every reorder (the reference below, the pre-change
``KVBuffer.reorder``), for a translator, a well-formed parser with and without a decoder pointer, and
a run trained on a Multi30k slice; and it copies fewer histories."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tbuild.components.kv_cache import KVBuffer, Move
from tbuild.components.specs.special import EOS, PAD
from tbuild.engine.decoding.search import Hypothesis, Rules, beam_search
from tbuild.engine.tasks.parsing.constrained import WellFormed
from tests.components.test_pointer import tiny
from tests.conftest import multi30k_lines, tiny_model
from tests.engine.tasks.parsing.test_constrained import vocab


def _copy_every_row(self: KVBuffer, index: torch.Tensor, move: Move | None = None) -> Move | None:
    """The reference: every kept row's history copied into a new buffer, rows in order (the old reorder)."""
    del move
    if self.k is not None:
        self._copy_all(index)
    return None


def _outputs(hyps: list[list[Hypothesis]]) -> list:
    return [[(h.tokens, h.score, h.log_prob, h.token_log_probs, h.complete) for h in s] for s in hyps]


def _both(search: Callable[[], list[list[Hypothesis]]], monkeypatch: pytest.MonkeyPatch) -> tuple[list, int, int]:
    """The search's outputs with the new cache and with the reference, and the history rows each copied."""
    copied = {"new": 0, "old": 0}
    reorder, copy_all = KVBuffer.reorder, KVBuffer._copy_all

    def counted(self: KVBuffer, index: torch.Tensor, move: Move | None = None) -> Move | None:
        used = reorder(self, index, move)
        copied["new"] += index.numel() if used is None and self.k is not None else 0 if used is None \
            else used.source.numel()
        return used

    monkeypatch.setattr(KVBuffer, "reorder", counted)
    new = _outputs(search())

    def counted_all(self: KVBuffer, index: torch.Tensor) -> None:
        copied["old"] += index.numel()
        copy_all(self, index)

    monkeypatch.setattr(KVBuffer, "reorder", _copy_every_row)
    monkeypatch.setattr(KVBuffer, "_copy_all", counted_all)
    old = _outputs(search())
    assert new == old  # tokens, scores, log-probs: identical, not close
    return new, copied["new"], copied["old"]


def _sources(lengths: list[int], vocab_size: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    src = torch.full((len(lengths), max(lengths) + 1), PAD)
    for i, n in enumerate(lengths):
        src[i, :n] = torch.randint(9, vocab_size, (n,), generator=g)
        src[i, n] = EOS
    return src


@pytest.mark.parametrize("beam", [1, 4])
def test_translation_beam_is_unchanged(beam: int, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tiny_model()
    src = _sources([3, 7, 1, 9, 5, 4], 40, 0)
    out, new, old = _both(lambda: beam_search(model, src, beam=beam, nbest=beam, alpha=0.6, max_len_a=1.2,
                                              max_len_b=5, token_scores=True), monkeypatch)
    assert all(out) and new < old
    if beam == 1:
        assert new <= 6 * 2  # only the rows that finished sentences left behind (2 layers)


@pytest.mark.parametrize("order", ["top_down", "in_order"])
def test_well_formed_parser_beam_is_unchanged(order: str, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tiny_model()
    lengths = [3, 6, 1, 9, 4]
    src = _sources(lengths, 40, 1)
    out, new, old = _both(lambda: beam_search(
        model, src, beam=12, nbest=3, alpha=0.3, max_len_a=2.0, max_len_b=4,
        rules=Rules(step_rule=WellFormed(vocab(), torch.tensor(lengths), order))), monkeypatch)
    assert all(out) and new < old


def test_parser_with_a_pointer_is_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    """The decoder pointer's per-row leaf counts follow the beams beside the cache."""
    model = tiny({"kind": "next_word", "advance_ids": "8", "source": "pieces"}, vocab=40)
    lengths = [4, 2, 7]
    src = _sources(lengths, 40, 2)
    out, new, old = _both(lambda: beam_search(
        model, src, beam=8, nbest=2, alpha=0.3, max_len_a=2.0, max_len_b=4, token_scores=True,
        rules=Rules(step_rule=WellFormed(vocab(), torch.tensor(lengths)))), monkeypatch)
    assert all(out) and new < old


def test_trained_translator_is_unchanged(tiny_run: Path, multi30k: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run trained on a Multi30k slice translating the first 12 sentences of test2016 at beam 4, 2-best."""
    from tbuild.engine.decoding.native import load_native_engine
    from tbuild.engine.decoding.request import DecodeRequest
    from tbuild.engine.run.directory import resolve_run

    translator = load_native_engine(resolve_run(tiny_run, []), device="cpu")
    request = DecodeRequest(beam=4, nbest=2, alpha=0.6, max_len_a=1.0, max_len_b=5, format="jsonl")
    lines = multi30k_lines(multi30k, "test2016.en.gz", 12)
    out, new, old = _both(lambda: translator.translate(lines, request), monkeypatch)
    assert all(out) and new < old
