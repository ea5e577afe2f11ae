"""An M2M100ForConditionalGeneration folder numbered as NLLB's are published (no download): a tokenizer.json with
<s> 0, <pad> 1, </s> 2, <unk> 3 and the language codes (eng_Latn, fra_Latn) as special tokens after the pieces;
the decoder starts from </s>, and generation forces the target language's code first. The import keeps its ids
(the record's target starts from eos): with the source language code written at the start of a line and the
target's as the target prefix, logits and log-probabilities are HF's on every row and `tbuild decode` gives HF
`generate`'s tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tbuild.cli.app import app

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
    eng, fra = (tk.token_to_id(c) for c in CODES)
    src = [eng, *tk.encode(LINES[0], add_special_tokens=False).ids, 2]
    tgt = [2, fra, *tk.encode(LINES[2], add_special_tokens=False).ids]
    with torch.no_grad():
        theirs = hf(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([tgt])).logits
        ours = model(torch.tensor([src]), torch.tensor([tgt]))
    assert (ours - theirs).abs().max().item() < 1e-4
    assert (ours.log_softmax(-1) - theirs.log_softmax(-1)).abs().max().item() < 1e-4


def test_decode_with_the_language_codes_gives_hf_generate(nllb, tmp_path: Path) -> None:  # noqa: ANN001
    root, hf, tk = nllb
    eng, fra = (tk.token_to_id(c) for c in CODES)
    lines = ["the cat sat", "a dog ran in the park"]
    result = CliRunner().invoke(app, ["decode", str(root / "run"), "--beam", "1", "--device", "cpu", "--set",
                                      "decode.max_len_a=0", "--set", "decode.max_len_b=10"],
                                input="".join(f"eng_Latn {line}\tfra_Latn\n" for line in lines))
    assert result.exit_code == 0, result.output
    ours = result.output.rstrip("\n").split("\n")[-len(lines):]
    for line, text in zip(lines, ours, strict=True):
        src = [eng, *tk.encode(line, add_special_tokens=False).ids, 2]
        out = hf.generate(input_ids=torch.tensor([src]), forced_bos_token_id=fra, num_beams=1, do_sample=False,
                          max_new_tokens=9)[0].tolist()  # tbuild's 10 count the EOS it ends with
        assert text == tk.decode(out, skip_special_tokens=True), (text, out)
