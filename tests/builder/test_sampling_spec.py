"""data.tokenizer.sampling: validated where it is written, off by default without changing any spec's form."""

from __future__ import annotations

from pathlib import Path

import pytest

from tbuild.builder import SpecError, load_spec
from tbuild.builder.spec import SamplingSpec

REPO = Path(__file__).resolve().parents[2]


def error_of(tmp: Path, text: str) -> str:
    path = tmp / "s.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return str(info.value).replace(f"{path}:", "")


def test_defaults_and_what_is_taken() -> None:
    assert load_spec({"data": {"dataset": "treebank", "tokenizer": {"sampling": {}}}}).spec.data.tokenizer.sampling
    spec = load_spec({"data": {"tokenizer": {"sampling": {}}}}).spec
    assert spec.data.tokenizer.sampling == SamplingSpec(alpha=0.1, nbest=None, variants=8)
    unigram = load_spec({"data": {"tokenizer": {"kind": "unigram", "sampling": {"alpha": 1, "nbest": -1}}}}).spec
    assert unigram.data.tokenizer.sampling.nbest == -1
    assert load_spec({"data": {"tokenizer": {"kind": "unigram", "sampling": {"nbest": 64}}}}).spec \
        .data.tokenizer.sampling.nbest == 64


def test_off_by_default_and_absent_from_the_resolved_form() -> None:
    """A spec without the field dumps no sampling key and keeps its architecture hash; with it, the hash is
    the same (sampling changes the data, not the model)."""
    base = load_spec(REPO / "specs" / "multi30k.yaml").spec
    assert base.data.tokenizer.sampling is None and "sampling" not in base.model_dump(mode="json")["data"]["tokenizer"]
    sampled = load_spec(REPO / "specs" / "multi30k.yaml", ["data.tokenizer.sampling.alpha=0.1"]).spec
    assert sampled.model_dump(mode="json")["data"]["tokenizer"]["sampling"] == {"alpha": 0.1, "nbest": None,
                                                                               "variants": 8}
    assert sampled.architecture_hash() == base.architecture_hash()


@pytest.mark.parametrize(("text", "expected"), [
    ("data:\n  tokenizer:\n    sampling: {alpha: 0}\n",
     "3: data.tokenizer.sampling.alpha: Input should be greater than 0"),
    ("data:\n  tokenizer:\n    sampling: {alpha: 1.5}\n",
     "3: data.tokenizer.sampling.alpha: Input should be less than or equal to 1"),
    ("data:\n  tokenizer:\n    sampling: {variants: 0}\n",
     "3: data.tokenizer.sampling.variants: Input should be greater than or equal to 1"),
    ("data:\n  tokenizer:\n    kind: unigram\n    sampling: {nbest: 1}\n",
     "4: data.tokenizer.sampling.nbest: nbest 1 samples nothing"),
    ("data:\n  tokenizer:\n    sampling: {nbest: 64}\n",
     "3: data.tokenizer.sampling.nbest: a bpe tokenizer samples by BPE-dropout, which has no n-best"),
    ("data:\n  tokenizer:\n    model: tokenizer.json\n    sampling: {}\n",
     "4: data.tokenizer.sampling: model is a Hugging Face tokenizers file"),
    ("data:\n  dataset: tagging\n  tokenizer:\n    sampling: {}\n",
     "4: data.tokenizer.sampling: data set 'tagging' holds labels, whose rows are not sampled"),
    ("data:\n  dataset: {kind: classification}\n  tokenizer: {sampling: {}}\n",
     "3: data.tokenizer.sampling: data set 'classification' holds labels"),
    ("data:\n  dataset: {kind: treebank, linearization: words}\n  tokenizer: {sampling: {}}\n",
     "3: data.tokenizer.sampling: linearization words: a tree's words are the source's pieces"),
])
def test_refused_in_one_line_naming_the_field(tmp_path: Path, text: str, expected: str) -> None:
    line, what = expected.split(": ", 1)
    message = error_of(tmp_path, text)  # LINE:COLUMN: field: why
    assert message.startswith(f"{line}:") and f": {what}" in message and "\n" not in message.strip()
