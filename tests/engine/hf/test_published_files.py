"""Files as they are published (no download): a GPT-2 folder whose tokenizer.json carries fixed-length padding and
truncation, added tokens (special and not), an accent-stripping, lowercasing normalizer, and whose
generation_config.json sets greedy search, max_new_tokens and n-gram blocking. The import clears the padding and
truncation, saying so; the run encodes as transformers' AutoTokenizer on the folder, and `tbuild generate` with no
options gives what `generate` on the folder gives with its own defaults. What tbuild has no equivalent for
(repetition_penalty, a list of eos ids, a language model's max_length, a sampling with two cuts,
tokenizer_config.json's add_bos_token beside a tokenizer.json) is said in one line each; a post-processor adding a
token that is no role's is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.engine.data.tokenizer import Tokenizer
from tbuild.engine.decoding.lm import prompt_ids
from tbuild.engine.run.directory import resolve_run

from .test_gpt2_published import END, _byte_level
from .test_import_hf import GPT2, _perturbed

transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install -e '.[export]')")
tokenizers = pytest.importorskip("tokenizers", reason="tokenizers not installed (pip install -e '.[export]')")

runner = CliRunner()
TEXTS = ["The Cat sat", "ÜBER den Fluss catdog", "a dog <|sep|> ran", "Zwei Hunde café"]


def _folder(root: Path, generation: dict, tokenizer_config: dict | None = None) -> tuple[Path, object]:
    """A random sharp GPT-2 with the published tokenizer.json quirks and ``generation`` as its
    generation_config.json; the folder and the HF model."""
    from tokenizers import normalizers

    folder = root / "hf"
    folder.mkdir()
    tk = _byte_level(folder, [END])
    tk.normalizer = normalizers.Sequence([normalizers.NFKD(), normalizers.StripAccents(), normalizers.Lowercase()])
    tk.add_tokens(["catdog"])  # an added token, not special
    tk.add_special_tokens(["<|sep|>"])
    tk.enable_padding(length=128, pad_id=tk.token_to_id(END), pad_token=END)  # as many published files
    tk.enable_truncation(max_length=128)
    tk.save(str(folder / "tokenizer.json"))
    end = tk.token_to_id(END)
    (folder / "tokenizer_config.json").write_text(json.dumps(  # the class that reads tokenizer.json as it is
        {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": END, "eos_token": END, "unk_token": END}
        | (tokenizer_config or {})))
    config = {k: v for k, v in GPT2.items() if k != "pad_token_id"} | {
        "vocab_size": tk.get_vocab_size(), "bos_token_id": end, "eos_token_id": end, "n_positions": 64}
    torch.manual_seed(0)
    hf = _perturbed(transformers.GPT2LMHeadModel(transformers.GPT2Config(**config)))
    hf.save_pretrained(folder)
    (folder / "generation_config.json").write_text(json.dumps({"bos_token_id": end, "eos_token_id": end}
                                                              | generation))
    return folder, transformers.GPT2LMHeadModel.from_pretrained(folder).eval()


def _import(folder: Path, out: Path) -> list[str]:
    result = runner.invoke(app, ["import", "hf", str(folder), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return [line[len("note: "):] for line in result.output.splitlines() if line.startswith("note: ")]


def test_a_published_tokenizer_and_generation_config_are_honoured(tmp_path: Path) -> None:
    folder, hf = _folder(tmp_path, {"do_sample": False, "num_beams": 1, "max_new_tokens": 7,
                                    "no_repeat_ngram_size": 3})
    notes = _import(folder, tmp_path / "run")
    assert [n.split(" (")[0] for n in notes] == ["tokenizer.json: its padding", "tokenizer.json: its truncation"]
    assert "max_length 128" in notes[1]
    written = json.loads((tmp_path / "run" / "tokenizer.json").read_text())
    assert written["padding"] is None and written["truncation"] is None
    run = resolve_run(tmp_path / "run")
    decode = run.spec.decode
    assert (decode.beam, decode.max_len_b, decode.no_repeat_ngram, decode.sampling) == (1, 7, 3, None)
    tok = Tokenizer.load(run.tokenizer, run.spec.data.tokenizer.special)
    theirs = transformers.AutoTokenizer.from_pretrained(str(folder))
    for text in TEXTS:  # normalized, the added tokens matched whole, nothing added around, no padding
        assert prompt_ids(tok.special, tok.encode([text])[0]) == theirs(text)["input_ids"]
    result = runner.invoke(app, ["generate", str(tmp_path / "run"), "--device", "cpu"], input="\n".join(TEXTS) + "\n")
    assert result.exit_code == 0, result.output
    for text, line in zip(TEXTS, result.output.rstrip("\n").split("\n")[-len(TEXTS):], strict=True):
        ids = theirs(text, return_tensors="pt")
        out = hf.generate(**ids)[0].tolist()  # the folder's own defaults
        assert len(out) == ids["input_ids"].size(1) + 7  # sharp weights: no early end
        assert line == theirs.decode(out, skip_special_tokens=True)
    result = runner.invoke(app, ["generate", str(tmp_path / "run"), "--device", "cpu", "--format", "jsonl"],
                           input=TEXTS[0] + "\n")
    record = json.loads(result.output.strip().splitlines()[-1])
    first = theirs.convert_ids_to_tokens(theirs(TEXTS[0])["input_ids"])[0]
    assert record["tokens"][0] == first and record["token_log_probs"][0] == 0.0  # read, not predicted
    assert len(record["tokens"]) == len(record["token_log_probs"])  # each token (EOS last) its log-probability


def test_a_tokenizer_json_read_as_it_is_drops_its_padding(tmp_path: Path) -> None:
    """A published tokenizer.json read without the import (data.tokenizer.model naming it): no padding to 128
    pieces, no truncation either."""
    from tbuild.engine.data.tokenizers_file import TokenizersProcessor

    folder, _ = _folder(tmp_path, {})
    long = " ".join(["the cat sat"] * 60)
    ids = TokenizersProcessor(folder / "tokenizer.json").encode(["a", "the cat sat", long])
    theirs = transformers.AutoTokenizer.from_pretrained(str(folder))
    assert ids == [theirs(t)["input_ids"] for t in ("a", "the cat sat", long)] and len(ids[2]) > 128


def test_what_tbuild_cannot_apply_is_said_in_one_line_each(tmp_path: Path) -> None:
    folder, _ = _folder(tmp_path, {"do_sample": True, "top_k": 20, "top_p": 0.9, "temperature": 0.7,
                                   "max_length": 30, "repetition_penalty": 1.3, "eos_token_id": [0, 5]},
                        tokenizer_config={"add_bos_token": True})
    end = json.loads((folder / "config.json").read_text())["eos_token_id"]
    generation = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(json.dumps(generation | {"eos_token_id": [end, 5]}))
    notes = _import(folder, tmp_path / "run")
    said = "\n".join(notes)
    for part in ("add_bos_token True: not applied", "top_k 20 with top_p 0.9", "max_length 30: counts the prompt",
                 "repetition_penalty 1.3: tbuild has no equivalent", f"eos_token_id [{end}, 5]: tbuild stops"):
        assert part in said, said
    decode = yaml.safe_load((tmp_path / "run" / "spec.yaml").read_text())["decode"]
    assert (decode["sampling"], decode["topp"], decode["temperature"], decode["max_len_b"]) == ("topp", 0.9, 0.7, 50)
    special = resolve_run(tmp_path / "run").spec.special()
    assert special.source == ("text",)  # as AutoTokenizer: the tokenizer.json's (absent) post-processor decides
    theirs = transformers.AutoTokenizer.from_pretrained(str(folder))
    assert theirs("the cat")["input_ids"][0] != end


def test_a_post_processor_adding_a_token_no_role_has_is_refused(tmp_path: Path) -> None:
    folder, _ = _folder(tmp_path, {})
    data = json.loads((folder / "tokenizer.json").read_text())
    data["post_processor"] = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|sep|>",
                                                                                         "type_id": 0}},
                                                                       {"Sequence": {"id": "A", "type_id": 0}}],
                              "pair": [{"Sequence": {"id": "A", "type_id": 0}}],
                              "special_tokens": {"<|sep|>": {"id": "<|sep|>", "ids": [data["added_tokens"][-1]["id"]],
                                                             "tokens": ["<|sep|>"]}}}
    (folder / "tokenizer.json").write_text(json.dumps(data))
    result = runner.invoke(app, ["import", "hf", str(folder), "-o", str(tmp_path / "run")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == (
        "error: tokenizer.json post_processor adds '<|sep|>', which is none of the vocabulary's roles (unk, bos, eos)")
    assert not (tmp_path / "run").exists()


def test_a_tokenizer_transformers_reads_otherwise_is_refused(tmp_path: Path) -> None:
    """tokenizer_config.json naming GPT2Tokenizer: transformers builds GPT-2's pipeline (no normalizer) instead of
    reading the file's lowercasing one, so the folder's `tok(text)` is not what its tokenizer.json gives: one line
    naming both encodings, nothing written."""
    folder, _ = _folder(tmp_path, {}, tokenizer_config={"tokenizer_class": "GPT2Tokenizer"})
    result = runner.invoke(app, ["import", "hf", str(folder), "-o", str(tmp_path / "run")])
    assert result.exit_code == 2
    [line] = [line for line in result.output.splitlines() if not line.startswith("note: ")]
    assert line.startswith(f"error: {folder}: GPT2Tokenizer (transformers' AutoTokenizer on the folder) encodes "
                           "'Hello World' as [") and "tokenizer_class PreTrainedTokenizerFast" in line
    assert not (tmp_path / "run").exists()
