"""The decoding rows' test2016 lengths: drawn from Multi30k test2016's pairs with a fixed seed, and the
forced output lengths honoured by every engine, sentence by sentence."""

from __future__ import annotations

from pathlib import Path

from benchmarks.decoding import DecodeRun, expected_tokens, groups, run_decoding
from benchmarks.real_lengths import count_tokens, draw, read_pairs
from benchmarks.workload import Shape
from tbuild.engine.device.policy import choose_policy


def test_lengths_are_drawn_from_test2016_with_a_seed(multi30k: Path) -> None:
    src_texts, tgt_texts = read_pairs(multi30k)
    real = set(zip(count_tokens(src_texts, None), count_tokens(tgt_texts, None), strict=True))
    a, b, c = draw(40, 0, folder=multi30k), draw(40, 0, folder=multi30k), draw(40, 1, folder=multi30k)
    assert (a.src, a.out) == (b.src, b.out) and (a.src, a.out) != (c.src, c.out)
    assert set(zip(a.src, a.out, strict=True)) <= real and len(set(a.out)) > 3  # real pairs, not one length
    assert a.counted == "words × 1.0"


def test_every_engine_decodes_each_sentence_to_its_drawn_length(multi30k: Path) -> None:
    lengths = draw(6, 0, folder=multi30k, cap=12)
    run = DecodeRun(Shape("t", 32, 1, 2, 64), 60, 6, 0, 0, 0, 1, 1, lengths)
    rows = run_decoding(run, choose_policy("fp32", "cpu"), ["ct2"])
    expected = expected_tokens(groups(run, choose_policy("fp32", "cpu").device))
    assert sorted(expected) == sorted(lengths.out)
    timed = [r for r in rows if "tokens_per_s" in r]
    assert {r["impl"] for r in timed} >= {"tbuild"} and len(timed) >= 2
    for r in timed:
        assert r["per_sentence"] == expected and "note" not in r, r.get("note")
        assert r["lengths"] == "test2016 (words × 1.0)" and r["output_tokens"] == sum(lengths.out)
