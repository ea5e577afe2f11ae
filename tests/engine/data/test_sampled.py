"""Subword regularisation (data.tokenizer.sampling): the training split in K seeded, sampled variants stacked in
one prepared folder, epoch e cut from variant e mod K; validation and test encoded deterministically."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm

from tbuild.builder.spec import TrainSpec
from tbuild.components.specs.special import DEFAULT, EOS, PAD
from tbuild.engine.data import prepare as prepare_module
from tbuild.engine.data.batches import epoch_rows, token_batches
from tbuild.engine.data.joined import JoinedPairs
from tbuild.engine.data.mapped import MappedPairs
from tbuild.engine.data.masked import encode_masked
from tbuild.engine.data.pairs import load_pairs
from tbuild.engine.data.prepare import prepared_train
from tbuild.engine.data.tokenizer import Tokenizer, prepare_tokenizer
from tbuild.engine.errors import DataError
from tbuild.engine.run.directory import RunDir
from tbuild.engine.training.batching import Batching
from tests.engine.data.test_pairs import corpus, make_spec

N = 120  # training pairs


@pytest.fixture(scope="module")
def train_text(val_pairs: tuple[list[str], list[str]], tmp_path_factory: pytest.TempPathFactory) -> str:
    en, de = val_pairs
    return corpus(tmp_path_factory.mktemp("sampled"), "train", en[:N], de[:N])


@pytest.fixture(scope="module", params=["bpe", "unigram"])
def kind_tok(request: pytest.FixtureRequest, train_text: str,
             tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Tokenizer]:
    spec = make_spec({"train": train_text, "tokenizer": {"kind": request.param, "vocab_size": 300}})
    run = RunDir(tmp_path_factory.mktemp(request.param) / "run")
    return request.param, prepare_tokenizer(spec, run, lambda _: None)


def sampled_spec(train: str, kind: str, tok: Tokenizer, **sampling: object):  # noqa: ANN201 - Spec
    return make_spec({"train": train, "valid": train,
                      "tokenizer": {"kind": kind, "model": str(tok.path), "sampling": {"variants": 3, **sampling}}})


def rows(pairs: MappedPairs, side: str, rows: range) -> list[list[int]]:
    """The rows' ids, EOS and padding removed."""
    ids = pairs.padded(np.arange(rows.start, rows.stop), side, PAD)
    return [[int(i) for i in row if i not in (PAD, EOS)] for row in ids]


def test_variants_differ_keep_the_text_and_are_seeded(kind_tok: tuple[str, Tokenizer], train_text: str,
                                                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each variant is a sampled encoding of every pair: the variants differ from each other and from the best
    segmentation, every row decodes to the text the best one does, and a second preparation (here with 2 worker
    processes over the 5 chunks, the first in this process) writes the same arrays."""
    kind, tok = kind_tok
    spec = sampled_spec(train_text, kind, tok, alpha=0.1)
    monkeypatch.setattr(prepare_module, "CHUNK_PAIRS", 24)
    logs: list[str] = []
    pairs = prepared_train(spec, tok, RunDir(tmp_path / "a"), logs.append, workers=1)
    assert pairs.variants == (N, N, N) and len(pairs) == 3 * N
    assert "kept 120 to 120 of 120 pairs in each of 3 sampled variants (alpha 0.1)" in logs[-1]
    en, de = (Path(f"{train_text}.{lang}").read_text().splitlines() for lang in ("en", "de"))
    for side, text in (("src", en), ("tgt", de)):
        best = tok.encode(text)
        variants = [rows(pairs, side, epoch_rows(pairs, v)) for v in range(3)]
        for variant in variants:
            assert [tok.decode(r) for r in variant] == [tok.decode(r) for r in best]
            assert sum(a != b for a, b in zip(variant, best, strict=True)) > N // 4
        assert variants[0] != variants[1] != variants[2] != variants[0]
    again = prepared_train(spec, tok, RunDir(tmp_path / "b"), lambda _: None, workers=2)
    assert again.header == {**pairs.header, "sources": again.header["sources"]}
    for part in ("tokens", "lengths", "offsets"):
        for side in ("src", "tgt"):
            np.testing.assert_array_equal(getattr(again, part)[side], getattr(pairs, part)[side])


def test_unigram_nbest_and_the_seed_choose_the_samples(train_text: str, tmp_path: Path,
                                                        kind_tok: tuple[str, Tokenizer]) -> None:
    """unigram: nbest (-1 by default: the whole lattice) is part of the sampling; another train.seed draws other
    variants; a BPE model refuses an nbest given for it."""
    kind, tok = kind_tok
    if kind == "bpe":
        spec = sampled_spec(train_text, kind, tok, nbest=8)  # valid as a spec: the model file's kind decides
        with pytest.raises(DataError, match=r"^data\.tokenizer\.sampling\.nbest: .* is a bpe model"):
            prepared_train(spec, tok, RunDir(tmp_path / "bpe"), lambda _: None)
        return
    lattice = prepared_train(sampled_spec(train_text, kind, tok), tok, RunDir(tmp_path / "all"), lambda _: None)
    two = prepared_train(sampled_spec(train_text, kind, tok, nbest=2), tok, RunDir(tmp_path / "two"), lambda _: None)
    assert lattice.header["sampling"]["nbest"] == -1 and two.header["sampling"]["nbest"] == 2
    reseeded = sampled_spec(train_text, kind, tok).model_copy(update={"train": TrainSpec(seed=2)})
    other = prepared_train(reseeded, tok, RunDir(tmp_path / "seed2"), lambda _: None)
    first = rows(lattice, "tgt", range(0, N))
    assert first != rows(two, "tgt", range(0, N)) and first != rows(other, "tgt", range(0, N))


def test_validation_and_test_stay_deterministic(kind_tok: tuple[str, Tokenizer], train_text: str) -> None:
    kind, tok = kind_tok
    spec = sampled_spec(train_text, kind, tok, alpha=0.5)
    plain = make_spec({"train": train_text, "valid": train_text})
    valid, reference = load_pairs(spec, "valid", tok, lambda _: None), load_pairs(plain, "valid", tok, lambda _: None)
    for side in ("src", "tgt"):
        np.testing.assert_array_equal(valid.padded(np.arange(N), side, PAD), reference.padded(np.arange(N), side, PAD))
    assert tok.encode(["A man is riding a bike."]) == tok.encode(["A man is riding a bike."])


def test_a_change_of_sampling_prepares_again_saying_why(kind_tok: tuple[str, Tokenizer], train_text: str,
                                                        tmp_path: Path) -> None:
    kind, tok = kind_tok
    run, logs = RunDir(tmp_path / "run"), []
    plain = prepared_train(make_spec({"train": train_text, "tokenizer": {"model": str(tok.path)}}), tok, run,
                           logs.append)
    assert plain.variants == () and "sampling" not in plain.header  # as before the field: still valid
    sampled = prepared_train(sampled_spec(train_text, kind, tok), tok, run, logs.append)
    assert "data.tokenizer.sampling changed from None to {'alpha': 0.1, 'nbest': -1, 'variants': 3" in logs[-2]
    prepared_train(sampled_spec(train_text, kind, tok), tok, run, logs.append)
    assert logs[-1] == f"data.train: 360 prepared pairs (3 sampled variants) in {run.prepared('train')}"
    again = prepared_train(sampled_spec(train_text, kind, tok, alpha=0.2), tok, run, logs.append)
    assert "'alpha': 0.1" in logs[-2] and "'alpha': 0.2" in logs[-2] and again.header != sampled.header


def test_epoch_batches_come_from_its_variant(kind_tok: tuple[str, Tokenizer], train_text: str,
                                             tmp_path: Path) -> None:
    """Epoch e's batches are variant e mod K's pairs, cut from that variant's lengths (token budget or packed
    rows), with their indices in the stack; a prefix LM's joined pairs read the same variants."""
    kind, tok = kind_tok
    pairs = prepared_train(sampled_spec(train_text, kind, tok), tok, RunDir(tmp_path / "run"), lambda _: None)
    assert [epoch_rows(pairs, e) for e in (0, 1, 2, 3, 5)] == [range(0, N), range(N, 2 * N), range(2 * N, 3 * N),
                                                              range(0, N), range(2 * N, 3 * N)]
    assert epoch_rows(JoinedPairs(pairs), 4) == range(N, 2 * N)
    for packing in (False, True):
        batching = Batching(pairs, TrainSpec(batch_tokens=500, seed=3, packing=packing), (1, 0), None, DEFAULT)
        for epoch in (1, 2):
            batches = batching.cut(epoch)
            indices = np.concatenate([b[:, 0] if packing else b for b in batches])
            assert sorted(indices.tolist()) == list(epoch_rows(pairs, epoch))
            if not packing:
                start = epoch * N
                expected = token_batches(pairs.src_lengths[start:start + N], pairs.tgt_lengths[start:start + N], 500,
                                         seed=3, epoch=epoch)
                assert [b.tolist() for b in batches] == [(b + start).tolist() for b in expected]


def test_refused_where_there_is_nothing_to_sample(train_text: str, tmp_path: Path,
                                                  val_pairs: tuple[list[str], list[str]]) -> None:
    """A word model (one segmentation), a tokenizers file and a masked LM's lines are refused in one line."""
    prefix = tmp_path / "word"
    spm.SentencePieceTrainer.train(input=f"{train_text}.en", model_prefix=str(prefix), model_type="word",
                                   vocab_size=200, minloglevel=2, pad_id=0, unk_id=1, bos_id=2, eos_id=3)
    word = Tokenizer.load(Path(f"{prefix}.model"))
    spec = sampled_spec(train_text, "bpe", word)
    with pytest.raises(DataError, match=r"^data\.tokenizer\.sampling: .* is a sentencepiece word model, which has "
                                        r"one segmentation"):
        prepared_train(spec, word, RunDir(tmp_path / "run"), lambda _: None)
    as_file = Tokenizer(word.sp, tmp_path / "tokenizer.json")
    with pytest.raises(DataError, match=r"^data\.tokenizer\.sampling: .* is a Hugging Face tokenizers file"):
        prepared_train(spec, as_file, RunDir(tmp_path / "run"), lambda _: None)
    masked = make_spec({"dataset": {"kind": "text"}, "train": f"{train_text}.en",
                        "tokenizer": {"sampling": {"alpha": 0.1}}}, kind="encoder_only", head={"kind": "masked_lm"})
    with pytest.raises(DataError, match=r"^data\.tokenizer\.sampling: a masked LM's training lines are masked"):
        encode_masked(masked, "train", word, lambda _: None)
