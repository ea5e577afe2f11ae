"""A folder laid out as facebook/m2m100_418M is published (no download): M2M100Tokenizer's own files, written by
its save_pretrained (sentencepiece.bpe.model, vocab.json in fairseq's numbering: <s> 0, <pad> 1, </s> 2, <unk> 3,
then the pieces in another order than the model's; the language tokens __en__, __fr__, … numbered after it),
no tokenizer.json. The decoder starts from </s>, and generation forces the target language's token first. The
import writes one tokenizers file in the folder's ids (its record: <s> 0, <pad> 1, </s> 2, <unk> 3, the decoder
starting from </s>): with the source language token written at the start of a line and the target's as the
target prefix, text encodes to M2M100Tokenizer's ids, logits and log-probabilities are HF's on every row, and
`tbuild decode` gives the text of HF `generate`'s tokens. Both sentencepiece kinds: bpe (the file's name) and
unigram."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.engine.data.tokenizer import Tokenizer
from tbuild.engine.run.directory import resolve_run

from .test_import_hf import SEQ2SEQ, _import, _loaded, _perturbed

transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install -e '.[export]')")
pytest.importorskip("tokenizers", reason="tokenizers not installed (pip install -e '.[export]')")
spm = pytest.importorskip("sentencepiece")

LINES = ["the cat sat on the mat", "a dog ran in the park", "le chat est sur le tapis", "un chien court vite",
         "the red car, the blue car!", "une voiture rouge et un chat"]
TEXTS = ["the cat ran", "  a   dog  ", "cats €, ünknown", "le chat", "", "the\tcar"]
EXTRA = "▁zzz"  # a vocab.json piece the sentencepiece model lacks (fairseq's dictionaries may have such)


def _vocab(sp: spm.SentencePieceProcessor) -> dict[str, int]:
    """vocab.json in fairseq's numbering: the four specials, then the model's pieces shuffled (fairseq orders
    its dictionary by frequency, not by sentencepiece id), and a piece the model lacks."""
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not (sp.is_control(i) or sp.is_unknown(i))]
    random.Random(0).shuffle(pieces)
    return {p: i for i, p in enumerate(["<s>", "<pad>", "</s>", "<unk>", *pieces, EXTRA])}


@pytest.fixture(scope="module", params=["bpe", "unigram"])
def m2m(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """(root, HF model, M2M100Tokenizer): root/hf the folder, root/run its import."""
    root = tmp_path_factory.mktemp(f"m2m100-{request.param}")
    spm.SentencePieceTrainer.train(sentence_iterator=iter(LINES * 20), model_prefix=str(root / "sp"), vocab_size=70,
                                   model_type=request.param, character_coverage=1.0, hard_vocab_limit=False,
                                   minloglevel=2)
    (root / "vocab.json").write_text(json.dumps(_vocab(spm.SentencePieceProcessor(model_file=str(root / "sp.model")))))
    tokenizer = transformers.M2M100Tokenizer(str(root / "vocab.json"), str(root / "sp.model"), src_lang="en",
                                             tgt_lang="fr")
    tokenizer.save_pretrained(root / "hf")  # the folder as transformers writes it
    # the model's rows: vocab.json's, the 100 language tokens and fairseq's 8 made-up words (as published)
    rows = tokenizer.vocab_size + len(tokenizer.lang_token_to_id) + 8
    config = SEQ2SEQ | {"vocab_size": rows, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
                        "decoder_start_token_id": 2, "forced_eos_token_id": 2}
    torch.manual_seed(0)
    hf = _perturbed(transformers.M2M100ForConditionalGeneration(transformers.M2M100Config(**config)))
    hf.save_pretrained(root / "hf")
    assert not (root / "hf" / "tokenizer.json").exists()
    _import(root / "hf", root / "run")
    return root, hf, transformers.M2M100Tokenizer.from_pretrained(root / "hf")


def _tokenizer(root: Path) -> Tokenizer:
    run = resolve_run(root / "run")
    return Tokenizer.load(run.tokenizer, run.spec.data.tokenizer.special)


def test_text_encodes_as_m2m100_tokenizer_encodes_it(m2m) -> None:  # noqa: ANN001
    root, _, tokenizer = m2m
    tok = _tokenizer(root)
    assert (tok.special.bos, tok.special.pad, tok.special.eos, tok.special.unk) == (0, 1, 2, 3)
    assert tok.special.source == ("text", "eos") and tok.special.start == 2  # the decoder starts from </s>
    for lang in ("en", "de"):
        tokenizer.src_lang = lang
        for text in TEXTS + LINES:
            assert tok.special.wrap(tok.encode([f"__{lang}__ {text}"])[0]) == tokenizer(text).input_ids, (lang, text)
    assert tok.encode(["__fr__"])[0] == [tokenizer.get_lang_id("fr")]  # a target prefix
    ids = tokenizer.get_vocab() | tokenizer.lang_token_to_id
    assert tok.vocab_size == len(ids) and all(tok.sp.piece_to_id(p) == i for p, i in ids.items())  # the folder's


def test_log_probabilities_are_hf_s(m2m) -> None:  # noqa: ANN001
    root, hf, tokenizer = m2m
    spec, model = _loaded(root / "run")
    assert spec.model.vocab_size == hf.config.vocab_size  # no row added
    tokenizer.src_lang = "en"
    src = tokenizer(LINES[0]).input_ids
    tgt = [2, tokenizer.get_lang_id("fr"), *tokenizer(LINES[2], add_special_tokens=False).input_ids]
    with torch.no_grad():
        theirs = hf(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([tgt])).logits
        ours = model(torch.tensor([src]), torch.tensor([tgt]))
    assert (ours - theirs).abs().max().item() < 1e-4  # every row, fairseq's made-up words after the languages too
    assert (ours.log_softmax(-1) - theirs.log_softmax(-1)).abs().max().item() < 1e-4


def test_decode_with_the_language_tokens_gives_hf_generate(m2m) -> None:  # noqa: ANN001
    root, hf, tokenizer = m2m
    tokenizer.src_lang = "en"
    ids = tokenizer.get_vocab() | tokenizer.lang_token_to_id
    lines = ["the cat sat", "a dog ran in the park", "the blue car", "un chat court", "le tapis rouge"]
    result = CliRunner().invoke(app, ["decode", str(root / "run"), "--beam", "1", "--device", "cpu", "--format",
                                      "jsonl", "--set", "decode.max_len_a=0", "--set", "decode.max_len_b=10"],
                                input="".join(f"__en__ {line}\t__fr__\n" for line in lines))
    assert result.exit_code == 0, result.output
    records = [json.loads(r) for r in result.stdout.splitlines()[-len(lines):]]
    languages = set(tokenizer.lang_token_to_id.values())
    for line, record in zip(lines, records, strict=True):
        out = hf.generate(input_ids=torch.tensor([tokenizer(line).input_ids]), num_beams=1, do_sample=False,
                          forced_bos_token_id=tokenizer.get_lang_id("fr"), max_new_tokens=9)[0].tolist()
        assert [ids[p] for p in record["tokens"]] == out[1:] + [2] * (out[-1] != 2), (line, record, out)
        # transformers 5 no longer counts M2M100's language tokens as special: the forced one is left out here
        assert record["output"] == tokenizer.decode([i for i in out if i not in languages], skip_special_tokens=True)
    assert any(r["output"] for r in records), "every output empty: the comparison would prove little"


def _copy(folder: Path, to: Path) -> Path:
    to.mkdir()
    for f in folder.iterdir():
        (to / f.name).write_bytes(f.read_bytes())
    return to


@pytest.mark.parametrize(("name", "content"), [
    ("vocab.json", None), ("vocab.json", b"{not json"), ("vocab.json", b'{"<s>": 0, "<pad>": 5}'),
    ("sentencepiece.bpe.model", None), ("sentencepiece.bpe.model", b"not a model"),
])
def test_a_missing_or_corrupt_file_is_named_and_nothing_written(m2m, tmp_path: Path, name: str,  # noqa: ANN001
                                                                content: bytes | None) -> None:
    root, _, _ = m2m
    folder = _copy(root / "hf", tmp_path / "hf")
    if content is None:
        (folder / name).unlink()
    else:
        (folder / name).write_bytes(content)
    result = CliRunner().invoke(app, ["import", "hf", str(folder), "-o", str(tmp_path / "run")])
    assert result.exit_code != 0 and str(folder / name) in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert not (tmp_path / "run").exists() and not list(tmp_path.glob(".run*"))
