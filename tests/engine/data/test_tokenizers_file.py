"""A Hugging Face tokenizers file as a run's tokenizer: ``Tokenizer.load`` reads a tokenizer.json (a byte-level
BPE here, GPT-2's kind) and answers as for a sentencepiece model: raw text to ids and back (any UTF-8), pieces
and ids, the special ids of the run's record (tbuild's own where it has none); a file whose special tokens are
not the record's, or not a tokenizers file, is one line naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tbuild.components.specs.special import BOS, EOS, PAD, UNK, Specials
from tbuild.engine.data.tokenizer import Tokenizer
from tbuild.engine.errors import DataError

tokenizers = pytest.importorskip("tokenizers", reason="tokenizers not installed (pip install -e '.[export]')")

LINES = ["the cat sat on the mat", "über den Fluss, 3 Hunde", "a dog ran"]


def _bpe(path: Path, specials: list[str]) -> Path:
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tk = tokenizers.Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(LINES * 10, trainers.BpeTrainer(vocab_size=280, special_tokens=specials, show_progress=False,
                                                           initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tk.save(str(path))
    return path


def test_a_tokenizers_file_encodes_and_decodes_raw_text(tmp_path: Path) -> None:
    tok = Tokenizer.load(_bpe(tmp_path / "tokenizer.json", ["<pad>", "<unk>", "<s>", "</s>"]))
    assert tok.vocab_size == 280
    text = "über 3 cats, 🐈 unseen"  # bytes never seen in training still encode (byte-level)
    ids = tok.encode([text])[0]
    assert min(ids) > EOS and tok.decode([BOS, *ids, EOS, PAD]) == text
    assert [tok.sp.id_to_piece(i) for i in (PAD, UNK, BOS, EOS)] == ["<pad>", "<unk>", "<s>", "</s>"]
    assert tok.sp.piece_to_id(tok.sp.id_to_piece(ids[0])) == ids[0] and tok.sp.piece_to_id("no such") == UNK
    assert tok.sp.is_control(BOS) and not tok.sp.is_control(ids[0]) and tok.sp.is_unknown(UNK)


def test_a_file_with_its_own_special_ids_loads_with_its_record(tmp_path: Path) -> None:
    """GPT-2's kind: one special token (id 0) for bos, eos and unk, no pad; without the record naming it the file
    is refused (tbuild's own ids 0 to 3 are not its special tokens), with it the ids are the file's."""
    gpt2_like = _bpe(tmp_path / "tokenizer.json", ["<|endoftext|>"])
    with pytest.raises(DataError, match=r"tokenizer.json: unk id 1 is not a special token of the file \(special: "
                       r"\[0\]\); data.tokenizer.special names the file's own"):
        Tokenizer.load(gpt2_like)
    record = Specials(pad=None, unk=0, bos=0, eos=0, source=("text",))
    tok = Tokenizer.load(gpt2_like, record)
    ids = tok.encode(["the cat"])[0]
    assert tok.special == record and tok.decode([0, *ids, 0]) == "the cat" and tok.sp.piece_to_id("no such") == 0


def test_another_file_is_one_line(tmp_path: Path) -> None:
    gpt2_like = _bpe(tmp_path / "tokenizer.json", ["<|endoftext|>"])
    gpt2_like.write_text('{"model": 1}')
    with pytest.raises(DataError, match="tokenizer.json: not a readable tokenizers file") as e:
        Tokenizer.load(gpt2_like)
    assert "\n" not in str(e.value)


def test_vocab_extend_refuses_a_tokenizers_file_in_one_line(tmp_path: Path) -> None:
    from tbuild.engine.errors import TbuildError
    from tbuild.engine.finetune.vocab import extend_tokenizer

    source = _bpe(tmp_path / "tokenizer.json", ["<pad>", "<unk>", "<s>", "</s>"])
    with pytest.raises(TbuildError, match="is a tokenizers file, and extend appends sentencepiece pieces"):
        extend_tokenizer(source, tmp_path / "own.model", tmp_path / "out.model")
    assert not (tmp_path / "out.model").exists()
