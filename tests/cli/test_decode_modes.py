"""`tbuild decode` modes end to end: sampling, target prefixes, n-gram blocking, jsonl scores and
alignments, profiles, ensembles, and the CTranslate2 engine's share of them."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.components.specs.special import BOS, EOS
from tbuild.engine.decoding.native import encode_sources, load_native_engine
from tbuild.engine.decoding.search import length_penalty
from tbuild.engine.run.directory import resolve_run

runner = CliRunner()
TEXT = "A dog runs in the snow.\n\nTwo men are talking.\n"
CPU = ["--device", "cpu"]


@pytest.fixture(scope="module")
def run(tiny_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(shutil.copytree(tiny_run, tmp_path_factory.mktemp("modes") / "run"))


def decode(*args: str, text: str = TEXT) -> tuple[int, str, str]:
    result = runner.invoke(app, ["decode", *args, *CPU], input=text)
    return result.exit_code, result.stdout, result.stderr


def test_sampling_reproducible_per_seed(run: Path) -> None:
    sample = ["--sampling", "topk", "--topk", "5", "--nbest", "3"]
    code, first, _ = decode(str(run), *sample, "--seed", "1")
    assert code == 0, first
    rows = [line.split(" ||| ") for line in first.splitlines()]
    assert [int(r[0]) for r in rows] == [0, 0, 0, 1, 2, 2, 2]  # three samples a line; the empty line: one row
    assert decode(str(run), *sample, "--seed", "1")[1] == first
    assert decode(str(run), *sample, "--seed", "2")[1] != first
    code, topp, _ = decode(str(run), "--sampling", "topp", "--topp", "0.5", "--temperature", "0.7")
    assert code == 0 and len(topp.splitlines()) == 3


def test_prefix_column_and_prefix_file(run: Path, tmp_path: Path) -> None:
    code, by_column, _ = decode(str(run), text="A dog runs in the snow.\tEin Hund\n\nTwo men.\t\n")
    assert code == 0, by_column
    lines = by_column.splitlines()
    assert lines[0].startswith("Ein Hund") and lines[1] == ""
    (tmp_path / "prefixes.txt").write_text("Ein Hund\n\n\n")
    code, by_file, _ = decode(str(run), "--prefix-file", str(tmp_path / "prefixes.txt"),
                              text="A dog runs in the snow.\n\nTwo men.\n")
    assert code == 0 and by_file == by_column
    assert decode(str(run), text="Two men.\n")[1] == "".join(lines[2] + "\n")  # an empty prefix: as without
    code, sampled, _ = decode(str(run), "--sampling", "temperature", "--nbest", "2", text="A dog.\tEin Hund\n")
    assert code == 0 and all(r.split(" ||| ")[1].startswith("Ein Hund") for r in sampled.splitlines())
    code, _, err = decode(str(run), text="a\tb\tc\td\te\n")
    assert code == 2 and "line 1 has 5 tab-separated columns" in err


def test_jsonl_scores_are_the_teacher_forced_log_probs(run: Path) -> None:
    code, out, _ = decode(str(run), "--format", "jsonl", "--align", "--nbest", "2", "--no-repeat-ngram", "2")
    assert code == 0, out
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["source"] for r in records] == TEXT.splitlines()
    assert records[1]["output"] == "" and records[1]["nbest"] == []
    translator = load_native_engine(resolve_run(run), device="cpu")
    tok = translator.tokenizer
    for record in (records[0], records[2]):
        source = encode_sources(tok, [record["source"]], translator.max_source_tokens)[0]
        assert len(record["nbest"]) == 2 and record["nbest"][0]["output"] == record["output"]
        for hyp in record["nbest"]:
            ids = [tok.sp.piece_to_id(p) for p in hyp["tokens"][:-1]]
            with torch.no_grad():
                logits = translator.model(torch.tensor([source]), torch.tensor([[BOS] + ids]))
            forced = logits.log_softmax(-1)[0].gather(1, torch.tensor([ids + [EOS]]).T).squeeze(1).tolist()
            assert hyp["token_log_probs"] == pytest.approx(forced, abs=1e-4)
            assert hyp["score"] == pytest.approx(sum(forced), abs=1e-4)
            assert hyp["normalized_score"] == pytest.approx(sum(forced) / length_penalty(len(ids) + 1, 0.6), abs=1e-4)
            grams = [tuple(ids[i:i + 2]) for i in range(len(ids) - 1)]
            assert len(grams) == len(set(grams))  # --no-repeat-ngram 2
        assert len(record["alignment"]) == len(record["tokens"]) - 1
        assert all(0 <= a < len(source) for a in record["alignment"])


def test_profiles(run: Path) -> None:
    profile = ["--set", "decode.profiles={sample: {sampling: topk, topk: 3, nbest: 2}}"]
    code, out, _ = decode(str(run), *profile, "--profile", "sample")
    assert code == 0, out
    assert len(out.splitlines()) == 5  # two samples per line, one row for the empty line
    assert decode(str(run), *profile, "--profile", "sample", "--nbest", "1")[1].count("\n") == 3  # options win
    code, _, err = decode(str(run), *profile, "--profile", "nope")
    assert code == 2 and "--profile 'nope': no such decode profile in the spec (it has: sample)" in err


def test_ensembles(run: Path, tmp_path: Path) -> None:
    twin = Path(shutil.copytree(run, tmp_path / "twin"))
    code, alone, _ = decode(str(run), "--nbest", "2")
    assert code == 0
    for args in ([str(run)], [str(run), str(twin)], [str(run), str(twin), "--combine", "prob", "--weights", "1,3"]):
        code, out, err = decode(*args, "--nbest", "2") if len(args) > 1 else decode(*args, "--nbest", "2")
        assert code == 0, err
        assert [line.split(" ||| ")[:2] for line in out.splitlines()] == [line.split(" ||| ")[:2]
                                                                          for line in alone.splitlines()]
    assert "ensemble of 2 models, --combine prob: log P(y) = log Σ_i w_i P_i(y)" in err
    assert "weights 0.25, 0.75" in err


def test_mismatched_ensembles_refused_before_loading(run: Path, tmp_path: Path) -> None:
    import sentencepiece as spm

    other = Path(shutil.copytree(run, tmp_path / "other"))
    shutil.rmtree(other / "checkpoints")
    (other / "best.safetensors").unlink()  # loading a model here would fail with another message
    lines = (Path(__file__).read_text() * 3).splitlines()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_prefix=str(other / "spm"), vocab_size=120,
                                   pad_id=0, unk_id=1, bos_id=2, eos_id=3, minloglevel=2)
    code, _, err = decode(str(run), str(other))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "has a different tokenizer sha256 than" in err
    code, _, err = decode(str(run), str(run), "--weights", "1")
    assert code == 2 and "--weights: 1 weights for 2 models" in err
    code, _, err = decode(str(run), str(run), "--engine", "ctranslate2")
    assert code == 2 and "ensembles decode with the native engine only" in err


def test_constraints_by_columns_and_by_file(run: Path, tmp_path: Path) -> None:
    """Phrases to include appear in the output, phrases to exclude do not; the columns and the JSON
    file say the same; CTranslate2 excludes as native does and refuses to include."""
    text = "A dog runs in the snow.\nTwo men are talking.\n"
    code, free, _ = decode(str(run), text=text)
    assert code == 0
    pieces = [json.loads(line)["tokens"] for line in decode(str(run), "--format", "jsonl", text=text)[1].splitlines()]
    # line 1 bans its output's first word-start piece (the phrase that is that word alone), line 2 nothing
    first = next(t for t in pieces[0] if t.startswith("\u2581") and len(t) > 1)
    banned = [first[1:], ""]
    wanted = [("Katze", "rot"), ("Fahrrad",)]
    assert not any(w in line for words, line in zip(wanted, free.splitlines(), strict=True) for w in words)
    columns = "".join(f"{src}\t\t{' ||| '.join(w)}\t{b}\n" for src, w, b in zip(text.splitlines(), wanted, banned,
                                                                             strict=True))
    code, held, err = decode(str(run), text=columns)
    assert code == 0, err
    for words, line in zip(wanted, held.splitlines(), strict=True):
        assert all(w in line for w in words), (line, words)
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"include": list(w), "exclude": [b] if b else []}) + "\n"
                                              for w, b in zip(wanted, banned, strict=True)))
    assert decode(str(run), "--constraints-file", str(tmp_path / "c.jsonl"), text=text)[1] == held
    code, out, _ = decode(str(run), "--format", "jsonl", text=columns)
    records = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and all(r["constraints_met"] for r in records)
    assert first not in records[0]["tokens"]
    (tmp_path / "bad.jsonl").write_text('{"include": ["x"]}\n{"include": [""]}\n')
    code, _, err = decode(str(run), "--constraints-file", str(tmp_path / "bad.jsonl"), text=text)
    assert code == 2 and "line 2: include and exclude must be lists of non-empty phrases" in err
    code, _, err = decode(str(run), text="a\t\tx |||  \n")
    assert code == 2 and "line 1: an empty constraint phrase" in err
    code, _, err = decode(str(run), "--sampling", "topk", text=columns)
    assert code == 2 and "need beam search" in err
    if importlib.util.find_spec("ctranslate2") is not None:
        excluded = "".join(f"{src}\t\t\t{b}\n" for src, b in zip(text.splitlines(), banned, strict=True))
        native = decode(str(run), text=excluded)
        theirs = decode(str(run), "--engine", "ctranslate2", text=excluded)
        assert native[0] == theirs[0] == 0 and theirs[1] == native[1]
        ours = native[1].splitlines()
        assert first[1:] not in ours[0].split() and ours[0] != free.splitlines()[0] and ours[1] == free.splitlines()[1]
        code, _, err = decode(str(run), "--engine", "ctranslate2", text=columns)
        assert code == 2 and "cannot force phrases into outputs" in err


def test_ctranslate2_prefix_and_sampling(run: Path) -> None:
    pytest.importorskip("ctranslate2")
    ct2 = ["--engine", "ctranslate2"]
    text = "A dog runs in the snow.\tEin Hund\n\nTwo men are talking.\n"
    for beam in ("1", "3"):
        native = decode(str(run), "--beam", beam, text=text)
        theirs = decode(str(run), "--beam", beam, *ct2, text=text)
        assert native[0] == theirs[0] == 0, theirs[2]
        assert theirs[1] == native[1] and theirs[1].startswith("Ein Hund")
    sample = ["--sampling", "topk", "--topk", "5", "--nbest", "2", "--seed", "3", *ct2]
    code, first, _ = decode(str(run), *sample)
    assert code == 0 and len(first.splitlines()) == 5
    assert decode(str(run), *sample)[1] == first
    code, _, err = decode(str(run), *ct2, "--format", "jsonl", "--align")
    assert code == 2 and err.strip().splitlines()[-1].startswith("error: --engine ctranslate2 gives no alignments")


def test_validate_and_export_say_which_profiles_each_target_honours(run: Path, tmp_path: Path) -> None:
    spec = Path(__file__).parents[2] / "specs" / "multi30k.yaml"
    shown = runner.invoke(app, ["validate", str(spec)])
    assert shown.exit_code == 0
    assert "# ctranslate2 honours decode profiles: decode, paper, sample, fast\n" in shown.stdout
    assert "# ctranslate2 runtime lacks: ensembles, alignments (--align), phrases to include" in shown.stdout
    assert "# hf honours decode profiles: decode, paper, sample\n" in shown.stdout
    assert "# hf cannot honour decode profile 'fast': quantization int8 (the hf export is float32)\n" in shown.stdout
    verdicts = json.loads(runner.invoke(app, ["validate", str(spec), "--json"]).stdout)["decode_profiles"]
    assert verdicts["ctranslate2"] == {"decode": None, "paper": None, "sample": None, "fast": None}
    cold = ["--set", "decode.profiles={cold: {sampling: temperature, temperature: 0}}"]
    refused = runner.invoke(app, ["export", str(run), "--to", "hf", "--check", "none", "-o", str(tmp_path / "hf"),
                                  *cold, "--profile", "cold"])
    assert refused.exit_code == 2 and not (tmp_path / "hf").exists()
    assert refused.output.strip() == ("error: hf cannot honour decode profile 'cold': sampling at temperature 0 "
                                      "(transformers needs a positive temperature)")
    pytest.importorskip("ctranslate2")
    done = runner.invoke(app, ["export", str(run), "--check", "none", "-o", str(tmp_path / "ct2"), *cold,
                               "--profile", "cold"])
    assert done.exit_code == 0, done.output
    assert "decode profiles ctranslate2 honours: decode, cold" in done.output
    code, out, _ = decode(str(run), *cold, "--profile", "cold", "--engine", "ctranslate2", text="A dog runs.\n")
    assert code == 0 and out == decode(str(run), "--beam", "1", text="A dog runs.\n")[1]  # temperature 0 = greedy


def test_side_files_refused_when_missing_or_doubled(run: Path, tmp_path: Path) -> None:
    """--prefix-file and --constraints-file: one line naming the problem, exit 2, when the file is
    missing or the input already carries that column."""
    prefixes = tmp_path / "prefixes.txt"
    prefixes.write_text("Ein\n\nZwei\n")
    code, _, err = decode(str(run), "--prefix-file", str(prefixes), text="A dog.\tEin\n")
    assert code == 2 and "--prefix-file: the input already has a prefix column" in err
    code, _, err = decode(str(run), "--prefix-file", str(tmp_path / "none.txt"))
    assert code == 2 and "none.txt: prefix file not found" in err
    code, _, err = decode(str(run), "--constraints-file", str(prefixes), text="A dog.\t\tHund\n")
    assert code == 2 and "--constraints-file: the input already has constraint columns" in err
    code, _, err = decode(str(run), "--constraints-file", str(tmp_path / "none.jsonl"))
    assert code == 2 and "none.jsonl: constraints file not found" in err
