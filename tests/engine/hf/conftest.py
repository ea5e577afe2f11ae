"""The tiny sentencepiece model the import tests save beside their Hugging Face models."""

from __future__ import annotations

import pytest

from tbuild.builder.spec import TokenizerSpec
from tbuild.engine.data.tokenizer import Tokenizer

PIECES = 30


@pytest.fixture(scope="module")
def spm(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    """A 30-piece sentencepiece model with tbuild's ids (PAD 0, UNK 1, BOS 2, EOS 3)."""
    words = ["a", "b", "ab", "ba", "abc", "cab", "bca", "cc", "aab", "bbc"]
    lines = [" ".join(words[(i * k) % len(words)] for k in range(1, 6)) for i in range(60)]
    return Tokenizer.train(lines, TokenizerSpec(vocab_size=PIECES), tmp_path_factory.mktemp("spm") / "spm")
