"""An M2M100ForConditionalGeneration folder numbered as NLLB's are published (no download): a tokenizer.json with
<s> 0, <pad> 1, </s> 2, <unk> 3 and the language codes (eng_Latn, fra_Latn) as special tokens after the pieces;
the decoder starts from </s>, and generation forces the target language's code first. The import keeps its ids
(the record's target starts from eos): with the source language code written at the start of a line and the
target's as the target prefix, logits and log-probabilities are HF's on every row and `tbuild decode` gives HF
`generate`'s tokens."""

from __future__ import annotations

import json

import pytest
import torch

from tests.engine.hf.language_codes import assert_decodes_as_generate

from .test_import_hf import SEQ2SEQ, _import, _loaded, _perturbed

transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install -e '.[export]')")
tokenizers = pytest.importorskip("tokenizers", reason="tokenizers not installed (pip install -e '.[export]')")

LINES = ["the cat sat on the mat", "a dog ran in the park", "le chat est sur le tapis", "un chien court"]
CODES = ["eng_Latn", "fra_Latn"]


@pytest.fixture(scope="module")
def nllb(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201 - (root, HF model, tokenizer)
    from tokenizers import decoders, models, pre_tokenizers, trainers

    root = tmp_path_factory.mktemp("nllb")
    folder = root / "hf"
    folder.mkdir()
    tk = tokenizers.Tokenizer(models.BPE(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Metaspace()
    tk.decoder = decoders.Metaspace()
    tk.train_from_iterator(LINES * 20, trainers.BpeTrainer(vocab_size=120, show_progress=False,
                                                           special_tokens=["<s>", "<pad>", "</s>", "<unk>"]))
    tk.add_special_tokens(CODES)
    tk.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"src_lang": "eng_Latn", "tgt_lang": "fra_Latn"}))
    config = SEQ2SEQ | {"vocab_size": tk.get_vocab_size(), "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
                        "decoder_start_token_id": 2, "forced_eos_token_id": 2}
    torch.manual_seed(0)
    hf = _perturbed(transformers.M2M100ForConditionalGeneration(transformers.M2M100Config(**config)))
    hf.save_pretrained(folder)
    _import(folder, root / "run")
    return root, hf, tk


def test_logits_and_log_probabilities_are_hf_s(nllb) -> None:  # noqa: ANN001
    root, hf, tk = nllb
    spec, model = _loaded(root / "run")
    special = spec.special()
    assert spec.model.vocab_size == tk.get_vocab_size() and special.target == ("eos", "text", "eos")
    assert (special.bos, special.pad, special.eos, special.unk) == (0, 1, 2, 3)
    assert_decodes_as_generate(root / "run", hf, tk, CODES, 9)  # tbuild's 10 count the EOS it ends with
