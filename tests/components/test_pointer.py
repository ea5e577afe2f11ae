"""The decoder's pointer into the source (``model.decoder.pointer``, components/pointer.py): its values on a
hand-made target, the incremental decoder equal to the full pass with it on (beam search's reorders and
finished sentences included), its spec errors naming the field, and models without one unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tbuild.builder import SpecError, build_model, load_spec
from tbuild.builder.inspect import inspect_model, meta_model
from tbuild.builder.spec import Spec
from tbuild.components.pointer import PointedMemory
from tbuild.components.specs.pointer import format_ids, parse_ids
from tbuild.components.specs.special import BOS, EOS, PAD
from tbuild.components.transformer import DecoderCache, padding_mask
from tbuild.engine.decoding.search import beam_search
from tests.conftest import REPO

LEAF, OPEN, CLOSE = 5, 7, 8  # a hand-made tree vocabulary: XX, (S, )S


def tiny(pointer: dict | None, vocab: int = 30, dropout: float = 0.0) -> torch.nn.Module:
    torch.manual_seed(0)
    decoder = {"layers": 2, "heads": 2, "d_ff": 32} | ({"pointer": pointer} if pointer else {})
    spec = Spec.model_validate({"model": {
        "vocab_size": vocab, "d_model": 16, "encoder": {"layers": 1, "heads": 2, "d_ff": 32}, "decoder": decoder,
        "dropout": {"residual": dropout, "embedding": dropout}}})
    return build_model(spec).eval()


def test_id_ranges_round_trip() -> None:
    assert format_ids([9, 5, 7, 8, 5]) == "5,7-9" and parse_ids("5,7-9") == [5, 7, 8, 9]
    with pytest.raises(ValueError, match="not an id or a range"):
        parse_ids("5,x")


def test_pointer_values_by_hand() -> None:
    """Words: units at the word-first pieces 10, 11, 12 (positions 0, 2, 3), then EOS (position 5)."""
    model = tiny({"kind": "next_word", "advance_ids": str(LEAF), "source": "words", "unit_ids": "10-20"})
    src = torch.tensor([[10, 25, 11, 12, 26, EOS, PAD]])
    pad = padding_mask(torch.tensor([6]), 7)
    memory, _ = model.encode(src, pad)
    assert isinstance(memory, PointedMemory)
    assert memory.units.tolist() == [[0, 2, 3, 5, 5, 5, 5, 5]]
    # fed: BOS (S XX XX (S XX )S XX XX XX; p counts the leaves fed up to each position
    tgt = torch.tensor([[BOS, OPEN, LEAF, LEAF, OPEN, LEAF, CLOSE, LEAF, LEAF, LEAF]])
    p = model.pointer.counts(tgt, None)
    assert p.tolist() == [[0, 0, 1, 2, 2, 3, 3, 4, 5, 6]]
    states = torch.arange(7.0)[None, :, None].expand(1, 7, 16)  # each position's state is its index
    where = model.pointer.gather(PointedMemory(states, memory.units), p, beams=1)[..., 0]
    assert where.tolist() == [[0, 0, 2, 3, 3, 5, 5, 5, 5, 5]]  # word 0, 1, 2, then the source's EOS
    pieces = tiny({"kind": "next_word", "advance_ids": str(LEAF), "source": "pieces"})
    assert pieces.encode(src, pad)[0].units.tolist() == [[0, 1, 2, 3, 4, 5, 5, 5]]


def _rescore(model: torch.nn.Module, src: torch.Tensor, tokens: list[int]) -> float:
    """log P(tokens, EOS | src) from one teacher-forced pass."""
    tgt = torch.tensor([[BOS, *tokens]])
    gold = torch.tensor(tokens + [EOS])
    lprobs = model(src[None], tgt)[0].float().log_softmax(-1)
    return float(lprobs.gather(1, gold[:, None]).sum())


@pytest.mark.parametrize("source", ["words", "pieces"])
def test_incremental_equals_full_pass_through_beam_search(source: str) -> None:
    """Beam search (reorders every step, finished sentences leave the batch) scores each output as one
    teacher-forced pass of the same model does."""
    pointer = {"kind": "next_word", "advance_ids": "4-24", "source": source}
    model = tiny(pointer | ({"unit_ids": "4-20"} if source == "words" else {}))
    torch.manual_seed(1)
    src = torch.randint(4, 30, (3, 9))
    src[:, -1] = EOS
    src[1, 5], src[1, 6:] = EOS, PAD
    src[2, 3], src[2, 4:] = EOS, PAD
    lengths = torch.tensor([9, 6, 4])
    hyps = beam_search(model, src, src_pad=padding_mask(lengths, 9), beam=4, nbest=4, alpha=0.0, max_len_a=1.0,
                       max_len_b=4)
    assert sum(len(h) for h in hyps) == 12
    with torch.no_grad():
        for i, sentence in enumerate(hyps):
            row = src[i][: int(lengths[i])]
            for hyp in sentence:
                assert hyp.log_prob == pytest.approx(_rescore(model, row, hyp.tokens), abs=1e-4)
    moved = [t for s in hyps for h in s for t in h.tokens if 4 <= t <= 24]
    assert moved  # the pointer moved in the outputs scored


def test_cached_steps_follow_a_reorder() -> None:
    """Step by step with a reorder between steps: the same logits as the full pass of the reordered rows."""
    model = tiny({"kind": "next_word", "advance_ids": "4-12", "source": "pieces"})
    torch.manual_seed(2)
    src = torch.randint(4, 30, (2, 6))
    src[:, -1] = EOS
    tgt = torch.cat([torch.full((4, 1), BOS), torch.randint(4, 30, (4, 5))], 1)  # 2 beams per sentence
    order = torch.tensor([1, 1, 3, 2])  # beam 0 of sentence 0 dies, beam 1 doubles; sentence 1 swaps
    with torch.no_grad():
        memory, pad = model.encode(src)
        cache = DecoderCache()
        for t in range(3):
            model.decode(tgt[:, t:t + 1], memory, pad, cache, beams=2)
        cache.reorder(order)
        moved = tgt[order]
        steps = [model.decode(moved[:, t:t + 1], memory, pad, cache, beams=2) for t in range(3, 6)]
        full = model.decode(moved, memory, pad, beams=2)
    assert torch.allclose(torch.cat(steps, 1), full[:, 3:], atol=1e-5)
    assert cache.pointer is not None and cache.pointer.tolist() == model.pointer.counts(moved, None)[:, -1].tolist()


def test_without_ids_the_model_says_what_is_missing() -> None:
    model = tiny({"kind": "next_word", "advance": ["XX"]})
    with pytest.raises(RuntimeError, match="not resolved"):
        model.encode(torch.tensor([[5, EOS]]))


def _error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return str(info.value)


def test_bad_pointer_settings_name_the_field(tmp_path: Path) -> None:
    msg = _error(tmp_path, "model:\n  decoder:\n    pointer: {kind: next_word, advance_ids: 5-x}\n")
    assert "model.decoder.pointer.advance_ids" in msg and "not an id or a range" in msg
    msg = _error(tmp_path, "model:\n  decoder:\n    pointer: {kind: next_wrd}\n")
    assert "model.decoder.pointer.kind: unknown kind 'next_wrd'" in msg
    msg = _error(tmp_path, "model:\n  decoder:\n    pointer: {kind: next_word}\ndata:\n  dataset: multi30k\n")
    assert "model.decoder.pointer.advance: leaves are the leaf tokens of a parse tree" in msg
    msg = _error(tmp_path, "model:\n  decoder:\n    pointer: {kind: next_word, advance: []}\n")
    assert "model.decoder.pointer.advance" in msg and "no target token" in msg
    msg = _error(tmp_path, "model:\n  kind: decoder_only\n  decoder:\n    pointer: {kind: next_word, advance: [a]}\n")
    assert "model.decoder.pointer: a decoder_only model has no source to point into" in msg


def test_the_pointer_adds_one_projection_and_nothing_else_changes() -> None:
    """ptb-sample.yaml and its sibling without a pointer differ by the projection alone (d_model², no
    bias); the recipe's inspect table has the pointer's row; a spec without a pointer has no pointer module."""
    base = load_spec(REPO / "specs" / "parsing" / "ptb-sample-no-pointer.yaml").spec
    pointed = load_spec(REPO / "specs" / "parsing" / "ptb-sample.yaml").spec
    count = [sum(p.numel() for p in meta_model(s).parameters()) for s in (base, pointed)]
    assert count[0] == 8_397_824 and count[1] - count[0] == 256 * 256
    assert meta_model(base).pointer is None
    # decoder.pointer: null leaves a model's architecture hash as it was (its runs and checkpoints still match)
    assert base.architecture_hash() == "13dc2ea8b8e7eb61" and pointed.architecture_hash() != base.architecture_hash()
    rows = {r.block: r for r in inspect_model(pointed).rows}
    assert rows["decoder pointer"].kind == "next_word" and rows["decoder pointer"].params == 65_536
    assert inspect_model(pointed).total == count[1]


def test_exports_refuse_a_pointer_in_one_line() -> None:
    from tbuild.engine.export.targets import TARGETS, UnsupportedExport, check_exportable

    spec = load_spec(REPO / "specs" / "parsing" / "ptb-sample.yaml").spec
    for target in TARGETS.values():
        with pytest.raises(UnsupportedExport) as info:
            check_exportable(spec, target)
        assert str(info.value).startswith(f"cannot export to {target.name}: model.decoder.pointer (next_word)")
        assert "\n" not in str(info.value)
