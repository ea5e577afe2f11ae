"""A folder laid out as Helsinki-NLP publishes opus-mt models (no download): two sentencepiece models, vocab.json
with ``</s>`` 0, ``<unk>`` 1, both sides' pieces and ``<pad>`` last, decoding from PAD, a language token. The
import keeps vocab.json's ids (its record: eos 0, unk 1, pad last, the decoder starting from pad): text
encodes as MarianTokenizer encodes it, the logits are HF's within 1e-4 on every row, greedy search gives HF's
greedy tokens, and `tbuild decode` gives the text MarianTokenizer decodes from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.engine.data.tokenizer import Tokenizer
from tbuild.engine.decoding.search import beam_search
from tbuild.engine.run.directory import resolve_run

transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install -e '.[export]')")
spm = pytest.importorskip("sentencepiece")

SOURCE = ["the cat sat", "a dog ran far", "cats and dogs", "the red car", "far and near", "a cat, a dog!"]
TARGET = ["die katze sass", "ein hund lief weit", "katzen und hunde", "das rote auto", "weit und nah"]
TEXTS = ["the cat ran", "  a   dog  ", "cats €, ünknown", ">>fr<< the dog", "", "the\tcar"]


def _spm(lines: list[str], path: Path) -> spm.SentencePieceProcessor:
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines * 20), model_prefix=str(path), vocab_size=40,
                                   model_type="unigram", character_coverage=1.0, hard_vocab_limit=False)
    return spm.SentencePieceProcessor(model_file=f"{path}.model")


@pytest.fixture(scope="module")
def opus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder: a random MarianMTModel (swish, tied, as opus-mt) with the published tokenizer layout."""
    folder = tmp_path_factory.mktemp("opus")
    src, tgt = _spm(SOURCE, folder / "src"), _spm(TARGET, folder / "tgt")
    pieces = ["</s>", "<unk>"]
    for sp in (src, tgt):
        pieces += [p for p in (sp.id_to_piece(i) for i in range(sp.get_piece_size()))
                   if not sp.is_control(sp.piece_to_id(p)) and p != "<unk>" and p not in pieces]
    pieces += [">>fr<<", "<pad>"]
    (folder / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(pieces)}))
    (folder / "source.spm").write_bytes((folder / "src.model").read_bytes())
    (folder / "target.spm").write_bytes((folder / "tgt.model").read_bytes())
    (folder / "tokenizer_config.json").write_text(json.dumps({"source_lang": "en", "target_lang": "de"}))
    pad = len(pieces) - 1
    config = transformers.MarianConfig(
        vocab_size=len(pieces), decoder_vocab_size=len(pieces), d_model=16, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32,
        max_position_embeddings=64, activation_function="swish", scale_embedding=True, pad_token_id=pad,
        eos_token_id=0, bos_token_id=0, decoder_start_token_id=pad, forced_eos_token_id=0)
    torch.manual_seed(0)
    hf = transformers.MarianMTModel(config)
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "embed_positions" not in name:
                p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(3)) * 0.3)
    hf.eval().save_pretrained(folder / "hf")
    for name in ("vocab.json", "source.spm", "target.spm", "tokenizer_config.json"):
        (folder / "hf" / name).write_bytes((folder / name).read_bytes())
    result = CliRunner().invoke(app, ["import", "hf", str(folder / "hf"), "-o", str(folder / "run")])
    assert result.exit_code == 0, result.output
    return folder


def _hf(opus: Path):  # noqa: ANN202
    return (transformers.MarianMTModel.from_pretrained(opus / "hf").eval(),
            transformers.MarianTokenizer(str(opus / "source.spm"), str(opus / "target.spm"), str(opus / "vocab.json")))


def _ours(opus: Path):  # noqa: ANN202
    """The imported run's spec, tokenizer and model."""
    from tbuild.builder import build_model
    from tbuild.engine.run.weights import load_weights

    run = resolve_run(opus / "run")
    model = build_model(run.spec)
    load_weights(model, run)
    return run.spec, Tokenizer.load(run.tokenizer, run.spec.data.tokenizer.special), model.eval()


def test_text_encodes_as_marian_tokenizer_encodes_it(opus: Path) -> None:
    spec, tok, _ = _ours(opus)
    _, tokenizer = _hf(opus)
    vocab = tokenizer.get_vocab()
    for text in TEXTS:
        assert tok.special.wrap(tok.encode([text])[0]) == tokenizer(text).input_ids, text  # the folder's ids
    assert spec.model.vocab_size == tok.vocab_size == len(vocab)  # no row added
    special = tok.special
    assert (special.eos, special.unk, special.pad, special.bos) == (0, 1, vocab["<pad>"], 0)  # config.json's bos
    assert special.target == ("pad", "text", "eos") and special.never == (vocab["<pad>"],)


def test_logits_on_every_row_match_hf(opus: Path) -> None:
    spec, tok, model = _ours(opus)
    hf, _ = _hf(opus)
    g = torch.Generator().manual_seed(1)
    rows, eos, pad = spec.model.vocab_size, tok.special.eos, tok.special.pad
    src = torch.cat([torch.randint(2, rows - 2, (2, 7), generator=g), torch.full((2, 1), eos)], 1)
    tgt = torch.cat([torch.full((2, 1), pad), torch.randint(2, rows - 2, (2, 5), generator=g)], 1)
    with torch.no_grad():
        ours = model(src, tgt)
        theirs = hf(input_ids=src, decoder_input_ids=tgt).logits
    assert (ours - theirs).abs().max().item() < 1e-4
    assert (ours.log_softmax(-1) - theirs.log_softmax(-1)).abs().max().item() < 1e-4


def test_greedy_and_decode_give_hf_generate(opus: Path) -> None:
    _, tok, model = _ours(opus)
    hf, tokenizer = _hf(opus)
    limit = 12
    lines = ["the cat ran", "a dog, far", "cats and the red car"]
    decoded = []
    for line in lines:
        src = tok.special.wrap(tok.encode([line])[0])
        ours = beam_search(model, torch.tensor([src]), beam=1, alpha=0.0, max_len_a=0.0, max_len_b=limit)[0][0]
        out = hf.generate(input_ids=torch.tensor([src]), num_beams=1, do_sample=False,
                          max_new_tokens=limit, suppress_tokens=[tok.special.pad], forced_eos_token_id=None,
                          bad_words_ids=None)[0].tolist()[1:]
        theirs = out[: out.index(0)] if 0 in out else out
        mine = ours.tokens
        assert theirs[: len(mine)] == mine and (len(theirs) == len(mine) or len(mine) == limit - 1)
        decoded.append(tokenizer.decode(mine, skip_special_tokens=True))
    assert any(decoded), "every output empty: the comparison would prove little"
    result = CliRunner().invoke(app, ["decode", str(opus / "run"), "--beam", "1", "--alpha", "0", "--device", "cpu",
                                      "-s", "decode.max_len_a=0", "-s", f"decode.max_len_b={limit}"],
                                input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-3:] == decoded


def test_a_folder_with_a_vocabulary_per_side_is_refused(opus: Path, tmp_path: Path) -> None:
    folder = tmp_path / "hf"
    folder.mkdir()
    for f in (opus / "hf").iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    (folder / "tokenizer_config.json").write_text(json.dumps({"separate_vocabs": True}))
    result = CliRunner().invoke(app, ["import", "hf", str(folder), "-o", str(tmp_path / "run")])
    assert result.exit_code != 0 and "separate_vocabs" in result.output
    assert not (tmp_path / "run").exists()


def test_export_scores_as_the_run_and_imports_back(opus: Path, tmp_path: Path) -> None:
    """The hf export keeps the run's ids, so MarianMTModel's log-probabilities are the run's; importing it again
    gives the same tensors and record; CTranslate2's export scores as the run does."""
    from .test_import_hf import _assert_round_trip

    (tmp_path / "run").symlink_to(opus / "run")
    _assert_round_trip(tmp_path)
    spec, _, model = _ours(opus)
    hf = transformers.MarianMTModel.from_pretrained(tmp_path / "again").eval()
    assert resolve_run(tmp_path / "run2").spec.data.tokenizer.special == spec.data.tokenizer.special
    g = torch.Generator().manual_seed(2)
    special = spec.special()
    src = torch.cat([torch.randint(2, spec.model.vocab_size - 2, (2, 6), generator=g),
                     torch.full((2, 1), special.eos)], 1)
    tgt = torch.cat([torch.full((2, 1), special.start), torch.randint(2, spec.model.vocab_size - 2, (2, 4),
                                                                      generator=g)], 1)
    with torch.no_grad():
        ours, theirs = model(src, tgt).log_softmax(-1), hf(input_ids=src, decoder_input_ids=tgt).logits.log_softmax(-1)
    assert (ours - theirs).abs().max().item() < 1e-4
    pytest.importorskip("ctranslate2", reason="ctranslate2 not installed (pip install -e '.[export]')")
    (tmp_path / "valid.en").write_text("the cat ran\na dog, far\n")
    (tmp_path / "valid.de").write_text("die Katze\nein Hund\n")
    result = CliRunner().invoke(app, ["export", str(tmp_path / "run"), "--to", "ctranslate2", "-o",
                                      str(tmp_path / "ct2"), "--set", f"data.valid={tmp_path / 'valid'}"])
    assert result.exit_code == 0, result.output
    report = json.loads(next((tmp_path / "ct2").glob("*parity*.json")).read_text())
    assert report["max_logprob_diff"] < 1e-4 and report["identical"] == 1.0


def test_the_hf_export_s_own_tokenizer_encodes_as_the_run(opus: Path, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """AutoTokenizer on the hf folder of an imported opus-mt (a tokenizer.json over vocab.json's rows) appends
    ``</s>`` as the run does, and the export's parity check encodes with it: a folder whose tokenizer.json adds
    nothing (the file copied as it is) fails the check."""
    import shutil

    import tbuild.engine.hf.tokenizer as written

    (tmp_path / "valid.en").write_text("the cat ran\na dog, far\n")
    (tmp_path / "valid.de").write_text("die Katze\nein Hund\n")
    export = ["export", str(opus / "run"), "--to", "hf", "--set", f"data.valid={tmp_path / 'valid'}", "-o"]
    result = CliRunner().invoke(app, [*export, str(tmp_path / "hf")])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "hf" / "parity.json").read_text())
    assert report["encoded_differently"] == 0 and report["identical_greedy"] == 1.0
    tok = Tokenizer.load(opus / "run" / "tokenizer.json", resolve_run(opus / "run").spec.data.tokenizer.special)
    own = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    for line in ["the cat ran", "a dog, far", ">>fr<< cats and the red car"]:
        assert own(line)["input_ids"] == tok.special.wrap(tok.encode([line])[0]) and own(line)["input_ids"][-1] == 0
    monkeypatch.setattr(written, "_with_source_template", lambda tok, out: shutil.copyfile(tok.path, out))
    result = CliRunner().invoke(app, [*export, str(tmp_path / "copied")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].startswith(
        "error: parity failed: the export's own tokenizer encodes 2 of 2 source lines otherwise than the run")


def test_decode_defaults_to_the_folder_s_generation_config(opus: Path, tmp_path: Path) -> None:
    """generation_config.json as opus-mt publishes it (here greedy, max_length 9, PAD banned): `tbuild decode` with no
    options gives `generate`'s text with the folder's own defaults on the folder's own encoding."""
    import shutil

    shutil.copytree(opus / "hf", tmp_path / "hf")
    pad = json.loads((opus / "hf" / "config.json").read_text())["pad_token_id"]
    (tmp_path / "hf" / "generation_config.json").write_text(json.dumps({
        "num_beams": 1, "max_length": 9, "bad_words_ids": [[pad]], "decoder_start_token_id": pad, "eos_token_id": 0,
        "forced_eos_token_id": 0, "pad_token_id": pad}))
    result = CliRunner().invoke(app, ["import", "hf", str(tmp_path / "hf"), "-o", str(tmp_path / "run")])
    assert result.exit_code == 0 and "note:" not in result.output, result.output
    decode = resolve_run(tmp_path / "run").spec.decode
    assert (decode.beam, decode.max_len_a, decode.max_len_b) == (1, 0.0, 8)
    _, tokenizer = _hf(opus)
    hf = transformers.MarianMTModel.from_pretrained(tmp_path / "hf").eval()
    lines = ["the cat ran", "a dog, far", "cats and the red car"]
    result = CliRunner().invoke(app, ["decode", str(tmp_path / "run"), "--device", "cpu"],
                                input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    theirs = [tokenizer.decode(hf.generate(**tokenizer(line, return_tensors="pt"))[0], skip_special_tokens=True)
              for line in lines]
    assert result.output.splitlines()[-3:] == theirs and any(theirs)
