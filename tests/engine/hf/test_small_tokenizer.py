"""A tokenizer with fewer pieces than the model's vocabulary rows (config.json's vocab_size): imported as it is
(a published table is often padded past its tokenizer, as Qwen2's), unless it has fewer pieces than any tbuild
tokenizer holds, which is one line naming the file and both sizes, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from tbuild.builder.spec import MIN_VOCAB

from .test_import_hf import GPT2, _import, _refused

transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install -e '.[export]')")
tokenizers = pytest.importorskip("tokenizers", reason="tokenizers not installed (pip install -e '.[export]')")

ROWS = 40


def _folder(folder: Path, words: int) -> None:
    """A GPT-2 of ROWS vocabulary rows beside a word-level tokenizer.json of 4 special tokens and ``words`` words."""
    specials = ["<pad>", "<unk>", "<s>", "</s>"]
    vocab = {t: i for i, t in enumerate([*specials, *(f"w{i}" for i in range(words))])}
    tk = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    tk.add_special_tokens(specials)
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(transformers.GPT2Config(**(GPT2 | {"vocab_size": ROWS}))).save_pretrained(folder)
    tk.save(str(folder / "tokenizer.json"))  # read as it is by transformers too (not as GPT2Tokenizer's BPE):
    (folder / "tokenizer_config.json").write_text('{"tokenizer_class": "PreTrainedTokenizerFast"}')


def test_a_tokenizer_smaller_than_the_table_is_imported(tmp_path: Path) -> None:
    _folder(tmp_path / "hf", 20)
    _import(tmp_path / "hf", tmp_path / "run")
    spec = yaml.safe_load((tmp_path / "run" / "spec.yaml").read_text())
    assert (spec["model"]["vocab_size"], spec["data"]["tokenizer"]["vocab_size"]) == (ROWS, 24)


def test_a_tokenizer_below_the_least_is_one_line_naming_the_file_and_both_sizes(tmp_path: Path) -> None:
    _folder(tmp_path / "hf", 1)
    _refused([str(tmp_path / "hf")], tmp_path / "run", f"{tmp_path / 'hf' / 'tokenizer.json'}: 5 pieces for "
             f"config.json's vocab_size {ROWS}; a tbuild tokenizer has at least {MIN_VOCAB}")
