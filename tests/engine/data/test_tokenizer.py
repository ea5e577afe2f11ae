"""The shared sentencepiece tokenizer: special ids, determinism, sampling, clear load errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import sentencepiece as spm

from tbuild.builder.spec import TokenizerSpec
from tbuild.components.specs.special import BOS, DEFAULT, EOS, PAD, UNK
from tbuild.engine.data.tokenizer import Tokenizer
from tbuild.engine.errors import DataError
from tests.conftest import multi30k_lines


@pytest.fixture(scope="module")
def sentences(multi30k: Path) -> list[str]:
    """The first 1,000 English, then the first 1,000 German, of Multi30k's validation sentences."""
    return [line.strip() for lang in ("en", "de") for line in multi30k_lines(multi30k, f"val.{lang}.gz", 1000)]


@pytest.fixture(scope="module")
def tok(sentences: list[str], tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    return Tokenizer.train(sentences, TokenizerSpec(vocab_size=500), tmp_path_factory.mktemp("tok") / "m")


def test_special_ids_are_the_engine_constants(tok: Tokenizer) -> None:
    assert (PAD, UNK, BOS, EOS) == (0, 1, 2, 3)
    sp = tok.sp
    assert (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id()) == (PAD, UNK, BOS, EOS)
    assert tok.vocab_size == 500
    assert tok.path.name == "m.model" and tok.path.is_file() and tok.path.with_suffix(".vocab").is_file()


def test_encode_decode_round_trip(tok: Tokenizer) -> None:
    texts = ["A man in a blue shirt is standing.", "Ein Hund läuft über die Wiese.", ""]
    ids = tok.encode(texts)
    assert ids[2] == [] and all(isinstance(i, int) for i in ids[0])
    assert all(i not in (PAD, BOS, EOS) for row in ids for i in row)
    assert tok.decode_batch(ids) == texts
    assert tok.decode([BOS, *ids[0], EOS, PAD, PAD]) == texts[0]
    assert tok.decode([*ids[0], EOS, *ids[1]]) == f"{texts[0]} {texts[1]}"  # skipped, not a stop


def test_shared_vocabulary_covers_both_languages(tok: Tokenizer) -> None:
    assert UNK not in tok.encode(["Zwei junge Männer", "Two young men"])[0]
    assert UNK not in tok.encode(["Zwei junge Männer", "Two young men"])[1]


def test_training_is_deterministic_and_quiet(
    tmp_path: Path, tok: Tokenizer, sentences: list[str], capfd: pytest.CaptureFixture
) -> None:
    again = Tokenizer.train(sentences, TokenizerSpec(vocab_size=500), tmp_path / "again")
    assert capfd.readouterr() == ("", "")
    pieces = [tok.sp.id_to_piece(i) for i in range(tok.vocab_size)]
    assert pieces == [again.sp.id_to_piece(i) for i in range(again.vocab_size)]
    assert tok.path.with_suffix(".vocab").read_text() == (tmp_path / "again.vocab").read_text()


def test_unigram(tmp_path: Path, sentences: list[str]) -> None:
    spec = TokenizerSpec(kind="unigram", vocab_size=200)
    uni = Tokenizer.train(sentences[:300] + sentences[1000:1300], spec, tmp_path / "uni")
    assert uni.sp.get_piece_size() == 200 and uni.decode(uni.encode(["A dog."])[0]) == "A dog."


def test_vocab_too_large_is_a_data_error(tmp_path: Path, sentences: list[str]) -> None:
    with pytest.raises(DataError, match=r"^data\.tokenizer: sentencepiece training failed on 20 sentences: "
                                        r"Vocabulary size too high"):
        Tokenizer.train(sentences[:20], TokenizerSpec(vocab_size=5000), tmp_path / "big")
    with pytest.raises(DataError, match="no non-empty training sentences"):
        Tokenizer.train(["", ""], TokenizerSpec(vocab_size=100), tmp_path / "none")


def test_load(tok: Tokenizer, tmp_path: Path) -> None:
    loaded = Tokenizer.load(tok.path)
    assert loaded.encode(["Two dogs"]) == tok.encode(["Two dogs"]) and loaded.path == tok.path
    with pytest.raises(DataError, match=f"^tokenizer model not found: {tmp_path / 'x.model'}$"):
        Tokenizer.load(tmp_path / "x.model")
    junk = tmp_path / "junk.model"
    junk.write_bytes(b"not a model")
    with pytest.raises(DataError, match=f"^{junk}: not a valid sentencepiece model"):
        Tokenizer.load(junk)


def test_a_model_with_its_own_special_ids_reports_them(tmp_path: Path, sentences: list[str]) -> None:
    """sentencepiece's defaults (Llama's numbering: unk 0, bos 1, eos 2, no pad): the tokenizer reports its own
    ids; a record naming others is refused in one line."""
    spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences[:200]), model_prefix=str(tmp_path / "d"),
                                   vocab_size=100, minloglevel=2)  # sentencepiece defaults: unk=0 bos=1 eos=2
    tok = Tokenizer.load(tmp_path / "d.model")
    assert (tok.special.pad, tok.special.unk, tok.special.bos, tok.special.eos) == (None, 0, 1, 2)
    assert tok.special.fill == 2 and tok.special.never == (1,)  # no pad: padding filled with eos, told by lengths
    pattern = r"d.model: its special ids are pad None, unk 0, bos 1, eos 2, not those of the run's data.tokenizer"
    with pytest.raises(DataError, match=pattern):
        Tokenizer.load(tmp_path / "d.model", DEFAULT)
