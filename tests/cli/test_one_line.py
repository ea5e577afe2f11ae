"""One output line per input line: `tbuild generate` and `tbuild decode` write a line break inside an output (a
tokenizers file decodes one) as its escape (``\\n``), `--format jsonl` keeping the text exact; `tbuild evaluate
--show` prints each example's texts on one line each, as written (rich markup in a sentence is not read)."""

from __future__ import annotations

import ast
import io
import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.engine.decoding.records import one_line

runner = CliRunner()


def test_one_line_escapes_newlines_and_carriage_returns() -> None:
    """No line is left to break at as files are read (universal newlines), and the line read as a Python string
    literal is the text again; tabs and \\x1d (which str.splitlines, but no file reader, breaks at) stay."""
    text = "a\nb\r\nc\rd\te\x1df"
    assert one_line(text).count("\n") == 0 and one_line(text).count("\r") == 0
    assert io.StringIO(one_line(text), newline=None).readlines() == [one_line(text)]
    assert ast.literal_eval(f'"{one_line(text)}"') == text
    assert one_line("x\ny") == "x\\ny" and "\t" in one_line(text) and "\x1d" in one_line(text)


@pytest.fixture(scope="module")
def newline_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An imported GPT-2 whose tokenizer.json has words that end in a newline: most of what it generates."""
    transformers = pytest.importorskip("transformers", reason="pip install -e '.[export]'")
    tokenizers = pytest.importorskip("tokenizers", reason="pip install -e '.[export]'")
    from tests.engine.hf.test_import_hf import GPT2, _import, _perturbed

    root = tmp_path_factory.mktemp("newlines")
    specials = ["<pad>", "<unk>", "<s>", "</s>"]
    vocab = {t: i for i, t in enumerate([*specials, "the", "cat", *(f"w{i}\n" for i in range(34))])}
    tk = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    tk.add_special_tokens(specials)
    torch.manual_seed(0)
    config = transformers.GPT2Config(**(GPT2 | {"vocab_size": len(vocab), "n_positions": 64}))
    _perturbed(transformers.GPT2LMHeadModel(config)).save_pretrained(root / "hf")
    tk.save(str(root / "hf" / "tokenizer.json"))  # read as it is by transformers too (not as GPT2Tokenizer's BPE)
    (root / "hf" / "tokenizer_config.json").write_text('{"tokenizer_class": "PreTrainedTokenizerFast"}')
    _import(root / "hf", root / "run")
    return root / "run"


def test_generate_writes_one_line_per_prompt(newline_lm: Path) -> None:
    prompts = ["the cat", "cat", "the", "cat the cat"]
    args = ["generate", str(newline_lm), "--beam", "1", "--max-new-tokens", "6", "--device", "cpu"]
    result = runner.invoke(app, args, input="\n".join(prompts) + "\n")
    assert result.exit_code == 0, result.output
    lines = result.stdout.split("\n")[:-1]
    assert len(lines) == len(prompts) and all(line.startswith(p) for line, p in zip(lines, prompts, strict=True))
    assert any("\\n" in line for line in lines)  # a continuation held a newline, written escaped
    nbest = runner.invoke(app, [*args, "--beam", "2", "--nbest", "2"], input="\n".join(prompts) + "\n")
    assert nbest.exit_code == 0 and len(nbest.stdout.splitlines()) == 2 * len(prompts), nbest.output
    exact = runner.invoke(app, [*args, "--format", "jsonl"], input="\n".join(prompts) + "\n")
    outputs = [json.loads(line)["output"] for line in exact.stdout.splitlines()]
    assert [one_line(o) for o in outputs] == lines and any("\n" in o for o in outputs)


def test_evaluate_show_prints_each_text_on_one_line_as_written(tiny_run: Path, tmp_path: Path) -> None:
    sources = ["A man [/] rides a bike.", "Two dogs [citation needed] play.", "A woman sings."]
    (tmp_path / "src.en").write_text("\n".join(sources) + "\n")
    (tmp_path / "ref.de").write_text("Ein Mann fährt Rad.\nZwei Hunde spielen.\nEine [red]Frau singt.\n")
    result = runner.invoke(app, ["evaluate", str(tiny_run), "--src", str(tmp_path / "src.en"), "--ref",
                                 str(tmp_path / "ref.de"), "--show", "3", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    shown = [line for line in result.stdout.splitlines() if line.startswith(("src ", "ref ", "hyp "))]
    assert [line for line in shown if line.startswith("src ")] == [
        "src A man [/] rides a bike.", "src Two dogs [citation needed] play.", "src A woman sings."]
    assert "ref Eine [red]Frau singt." in shown and len(shown) == 9
