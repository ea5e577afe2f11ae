"""The trainer's data: tokenizer per run (prepared, vocabulary fitted), encoded pairs with EOS, filtering."""

from __future__ import annotations

from pathlib import Path

import pytest
import sentencepiece as spm

from tbuild.builder import load_spec
from tbuild.components.specs.special import EOS
from tbuild.engine.data.pairs import Pairs, load_pairs
from tbuild.engine.data.tokenizer import Tokenizer, fit_vocab, prepare_tokenizer
from tbuild.engine.errors import DataError
from tbuild.engine.run.directory import RunDir


def corpus(folder: Path, name: str, src: list[str], tgt: list[str]) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.en").write_text("".join(s + "\n" for s in src), encoding="utf-8")
    (folder / f"{name}.de").write_text("".join(t + "\n" for t in tgt), encoding="utf-8")
    return str(folder / name)


def make_spec(data: dict, **model: object):  # noqa: ANN201 - Spec
    return load_spec({"data": {"tokenizer": {"vocab_size": 300}, **data}, "model": model}).spec


@pytest.fixture(scope="module")
def tok(val_pairs: tuple[list[str], list[str]], tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    en, de = val_pairs
    folder = tmp_path_factory.mktemp("corpus")
    spec = make_spec({"train": corpus(folder, "train", en, de)})
    return prepare_tokenizer(spec, RunDir(folder / "run"), lambda _: None)


def test_prepare_trains_stores_and_reuses(tmp_path: Path, val_pairs: tuple[list[str], list[str]]) -> None:
    en, de = val_pairs
    train = corpus(tmp_path / "c", "train", en, de)
    spec = make_spec({"train": train})
    logs: list[str] = []
    run = tmp_path / "run"
    tok = prepare_tokenizer(spec, RunDir(run), logs.append)
    assert tok.path == run / "spm.model" and tok.vocab_size == 300
    assert sorted(p.name for p in run.iterdir()) == ["spm.model", "spm.vocab"]
    assert "training a shared bpe model, vocab 300, on 600 + 600 sentences" in logs[-1]
    for suffix in (".en", ".de"):
        Path(train + suffix).unlink()  # the stored model is reused: no training data needed
    again = prepare_tokenizer(spec, RunDir(run), logs.append)
    assert again.encode(en[:5]) == tok.encode(en[:5]) and "from an earlier run" in logs[-1]


def test_prepare_samples_max_sentences_pairs(tmp_path: Path, val_pairs: tuple[list[str], list[str]],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """max_sentences is a seeded sample of pairs (both sides of the same pairs), taken in one place."""
    en, de = val_pairs
    seen: list[list[str]] = []
    real = spm.SentencePieceTrainer.train

    def spy(**kwargs: object) -> None:
        lines = list(kwargs.pop("sentence_iterator"))  # type: ignore[call-overload]
        seen.append(lines)
        real(sentence_iterator=iter(lines), **kwargs)

    monkeypatch.setattr(spm.SentencePieceTrainer, "train", spy)
    data = {"train": corpus(tmp_path, "train", en, de), "tokenizer": {"vocab_size": 200, "max_sentences": 250}}
    logs: list[str] = []
    for seed, name in ((1, "a"), (1, "b"), (2, "c")):
        spec = load_spec({"data": data, "train": {"seed": seed}}).spec
        prepare_tokenizer(spec, RunDir(tmp_path / name), logs.append)
    assert "on 250 + 250 sentences" in logs[-1]
    assert [len(s) for s in seen] == [500, 500, 500]
    assert seen[0] == seen[1] and seen[0] != seen[2]
    pairs = set(zip(en, de, strict=True))
    assert all((en, de) in pairs for en, de in zip(seen[0][:250], seen[0][250:], strict=True))


def test_prepare_uses_given_model(tmp_path: Path, tok: Tokenizer) -> None:
    spec = make_spec({"tokenizer": {"model": str(tok.path), "vocab_size": 300}})  # no train split needed
    assert prepare_tokenizer(spec, RunDir(tmp_path / "run"), lambda _: None).path == tok.path
    assert not (tmp_path / "run").exists()
    missing = make_spec({"tokenizer": {"model": str(tmp_path / "none.model")}})
    with pytest.raises(DataError, match="tokenizer model not found: .*none.model"):
        prepare_tokenizer(missing, RunDir(tmp_path / "run"), lambda _: None)


def test_fit_vocab_resolves_and_checks_sizes(tmp_path: Path, tok: Tokenizer) -> None:
    logs: list[str] = []
    other = make_spec({"tokenizer": {"model": str(tok.path), "vocab_size": 200}})
    assert prepare_tokenizer(other, RunDir(tmp_path), logs.append).vocab_size == 300
    fitted = fit_vocab(other, tok, logs.append)
    assert fitted.model.vocab_size == 300 and other.model.vocab_size == "from_tokenizer"
    assert logs[-1] == (f"tokenizer: {tok.path} has 300 pieces, not data.tokenizer.vocab_size 200; "
                        "the model follows the tokenizer")
    roomy = make_spec({"tokenizer": {"model": str(tok.path)}}, vocab_size=320)
    assert fit_vocab(roomy, tok, logs.append).model.vocab_size == 320  # extra rows are allowed
    for sizes in ({"vocab_size": 100}, {"vocab_size": 300, "src_vocab_size": 299}):
        name = "src_vocab_size" if "src_vocab_size" in sizes else "vocab_size"
        explicit = make_spec({"tokenizer": {"model": str(tok.path)}}, tie_embeddings="none", **sizes)
        with pytest.raises(DataError, match=rf"^model\.{name} \({sizes[name]}\) is smaller than the "
                                            r"tokenizer's 300 pieces .*; set it to 300"):
            fit_vocab(explicit, tok, lambda _: None)


def test_prepare_without_train_split(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"^data\.train is not set in the spec$"):
        prepare_tokenizer(make_spec({}), RunDir(tmp_path), lambda _: None)


def test_pairs_end_with_eos(tmp_path: Path, tok: Tokenizer, val_pairs: tuple[list[str], list[str]]) -> None:
    en, de = val_pairs
    spec = make_spec({"valid": corpus(tmp_path, "valid", en[:50], de[:50])})
    pairs = load_pairs(spec, "valid", tok, lambda _: None)
    assert isinstance(pairs, Pairs) and len(pairs) == 50 and len(pairs.tgt) == 50
    assert pairs.src[3] == tok.encode([en[3]])[0] + [EOS]
    assert pairs.tgt[3] == tok.encode([de[3]])[0] + [EOS]
    assert tok.decode(pairs.tgt[7]) == de[7]


def test_an_empty_split_is_an_error(tmp_path: Path, tok: Tokenizer) -> None:
    empty = make_spec({"valid": corpus(tmp_path, "empty", [], [])})
    with pytest.raises(DataError, match=r"^data\.valid: no lines in "):
        load_pairs(empty, "valid", tok, lambda _: None)


def test_multi30k_is_fetched_on_demand(
    tmp_path: Path, tok: Tokenizer, multi30k: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TBUILD_DATA_MIRROR", str(multi30k))
    spec = make_spec({"dataset": "multi30k", "test": str(tmp_path / "m" / "test2016")})
    logs: list[str] = []
    pairs = load_pairs(spec, "test", tok, logs.append)
    assert len(pairs) == 1000 and (tmp_path / "m" / "test2016.de.gz").is_file()
    assert "fetching Multi30k" in logs[0] and logs[-1].startswith("data.test: 1000 pairs from ")


def test_sample_pairs_is_uniform_ordered_and_streamed() -> None:
    from tbuild.engine.data.tokenizer import sample_pairs

    pairs = [(f"s{i}", f"t{i}") for i in range(100)]
    sample = sample_pairs(iter(pairs), 10, seed=3)
    assert len(sample) == 10 and sample == sorted(sample, key=lambda p: int(p[0][1:]))  # corpus order
    assert sample == sample_pairs((p for p in pairs), 10, seed=3) != sample_pairs(iter(pairs), 10, seed=4)
    assert sample_pairs(iter(pairs[:5]), 10, seed=3) == pairs[:5]
    counts = [0] * 100
    for seed in range(2000):
        for s, _ in sample_pairs(iter(pairs), 10, seed=seed):
            counts[int(s[1:])] += 1
    assert all(0.06 < c / 2000 < 0.14 for c in counts)  # every pair is drawn with probability k/n = 0.1
