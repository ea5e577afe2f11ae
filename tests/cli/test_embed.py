"""`tbuild embed` end to end on imported headless encoders (tests/engine/hf/test_import_headless.py builds the
folders): the vectors, as JSON lines and as a float32 .npy, equal what sentence-transformers computes on the
folder (max abs diff ≤ 1e-5), a line past max_seq_length cut as it cuts it with a warning naming the line; bad
input and a run that is not an encoder refused in one line (exit 2); the other commands refuse the run; a
tagger and a classifier start from it (train.init), train, and embed too."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app

pytest.importorskip("transformers", reason="transformers not installed (pip install -e '.[export]')")
np = pytest.importorskip("numpy")

from tests.engine.hf.test_import_headless import FOLDERS, sentence_folder, st_vectors  # noqa: E402

runner = CliRunner()
ENV = {"COLUMNS": "200"}
LINES = ["the cat sat on the mat", "a dogs ran in the parking zwei", "über", "the cat sat on the mat in the park "
         "and the dog ran"]  # the last: 15 tokens with [CLS] and [SEP], past the first folder's max_seq_length 8


def _imported(name: str, root: Path) -> Path:
    sentence_folder(name, root / "hf")
    result = runner.invoke(app, ["import", "hf", str(root / "hf"), "-o", str(root / "run")])
    assert result.exit_code == 0, result.output
    return root / "run"


@pytest.fixture(scope="module")
def bert_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An imported sentence-transformers BERT folder: mean pooling, normalized, max_seq_length 8."""
    return _imported("bert, mean, normalized, max_seq_length 8", tmp_path_factory.mktemp("bert"))


def _one_error(result) -> str:  # noqa: ANN001 - click's Result
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    return lines[0]


@pytest.mark.parametrize("name", FOLDERS)
def test_the_vectors_are_sentence_transformers_ones(name: str, tmp_path: Path) -> None:
    run = _imported(name, tmp_path)
    result = runner.invoke(app, ["embed", str(run), "--device", "cpu"], input="\n".join(LINES) + "\n", env=ENV)
    assert result.exit_code == 0, result.output
    ours = torch.tensor([json.loads(line) for line in result.stdout.splitlines()])
    theirs = st_vectors(tmp_path / "hf", LINES)
    assert ours.shape == theirs.shape == (len(LINES), 16)
    assert (ours - theirs).abs().max().item() <= 1e-5
    cut = FOLDERS[name][3] is not None
    assert ("warning: stdin: line 4: 15 tokens exceed the model's limit of 8; truncated" in result.stderr) == cut
    if FOLDERS[name][2]:
        assert torch.allclose(ours.norm(dim=1), torch.ones(len(LINES)))
    npy = tmp_path / "vectors.npy"
    (tmp_path / "lines.txt").write_text("\n".join(LINES) + "\n")
    again = runner.invoke(app, ["embed", str(run), "-i", str(tmp_path / "lines.txt"), "-o", str(npy)], env=ENV)
    assert again.exit_code == 0, again.output
    array = np.load(io.BytesIO(npy.read_bytes()))
    assert array.dtype == np.float32 and torch.equal(torch.from_numpy(array), ours)


def test_pooling_on_the_command_line_overrides_the_folder_s(bert_run: Path) -> None:
    """--pooling cls: the [CLS] state, still normalized as the run's head says."""
    from tbuild.engine.run.directory import resolve_run
    from tests.engine.hf.test_import_hf import _loaded

    result = runner.invoke(app, ["embed", str(bert_run), "--pooling", "cls"], input=LINES[0] + "\n", env=ENV)
    assert result.exit_code == 0, result.output
    spec, model = _loaded(bert_run)
    tok_path = resolve_run(bert_run).tokenizer
    from tbuild.engine.data.tokenizer import run_tokenizer

    tok = run_tokenizer(tok_path, spec)
    with torch.no_grad():
        states, _ = model.encode(torch.tensor([tok.special.wrap(tok.encode([LINES[0]])[0])]))
    expected = torch.nn.functional.normalize(states[:, 0], dim=1)[0]
    assert (torch.tensor(json.loads(result.stdout)) - expected).abs().max().item() < 1e-6


BAD = {
    "an empty line": (b"the cat\n\nthe dog\n", [], "stdin: line 2 is empty: a sentence vector needs text"),
    "invalid UTF-8": (b"the cat\n\xff\xfe\n", [], "stdin: line 2 is not valid UTF-8"),
    "a line of accents alone": ("the cat\n\u0301\n".encode(), [], "stdin: line 2 gives no token"),  # stripped
    "another pooling": (b"the cat\n", ["--pooling", "max"], "--pooling 'max': choose mean or cls"),
    "a missing input file": (b"", ["-i", "nosuch.txt"], "nosuch.txt: input file not found"),
}


@pytest.mark.parametrize(("data", "args", "expected"), BAD.values(), ids=BAD)
def test_bad_input_is_one_line(bert_run: Path, data: bytes, args: list[str], expected: str, tmp_path: Path) -> None:
    out = tmp_path / "v.npy"
    result = runner.invoke(app, ["embed", str(bert_run), *args, "-o", str(out)], input=data, env=ENV)
    assert expected in _one_error(result) and not out.exists()


def test_a_run_that_is_not_an_encoder_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "lm").mkdir()
    spec = {"model": {"kind": "decoder_only", "d_model": 16, "decoder": {"layers": 1, "heads": 2, "d_ff": 32}},
            "data": {"dataset": "text"}}
    (tmp_path / "lm" / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = runner.invoke(app, ["embed", str(tmp_path / "lm")], input="the cat\n", env=ENV)
    assert "tbuild embed pools an encoder's states, and this run is a decoder_only model" in _one_error(result)


@pytest.mark.parametrize("command", [["decode"], ["evaluate"], ["export", "--to", "hf"], ["serve"]])
def test_other_commands_refuse_a_sentence_encoder_in_one_line(bert_run: Path, command: list[str],
                                                              tmp_path: Path) -> None:
    args = [command[0], str(bert_run), *command[1:]] + (["-o", str(tmp_path / "out")] if command[0] == "export"
                                                        else [])
    line = _one_error(runner.invoke(app, args, input="the cat\n", env=ENV))
    assert "sentence encoder (model.head sentence_embedding)" in line and "tbuild embed" in line


TASKS = {"tagger": ({"kind": "token_classification", "bos": True}, {"kind": "tagging", "source": "files"}),
         "classifier": ({"kind": "sequence_classification", "pooling": "first"}, {"kind": "classification"})}


@pytest.mark.parametrize("task", TASKS)
def test_a_tagger_or_classifier_starts_from_it(bert_run: Path, task: str, tmp_path: Path) -> None:
    """The spec extends the imported run's (its model section whole) with a new head and data: every tensor of
    the encoder loads, the head starts new, and it trains."""
    head, dataset = TASKS[task]
    words = ["the cat sat", "a dog ran in the park", "the cat sat on the mat"]
    for split in ("train", "valid"):
        if task == "tagger":
            (tmp_path / f"{split}.words").write_text("".join(w + "\n" for w in words))
            (tmp_path / f"{split}.tags").write_text("DT NN VB\nDT NN VB IN DT NN\nDT NN VB IN DT NN\n")
        else:
            (tmp_path / f"{split}.tsv").write_text("".join(f"{'AB'[i % 2]}\t{w}\n" for i, w in enumerate(words)))
    suffix = "" if task == "tagger" else ".tsv"
    spec = {"extends": str(bert_run / "spec.yaml"), "name": task, "model": {"head": head},
            "data": {"dataset": dataset, "train": str(tmp_path / f"train{suffix}"),
                     "valid": str(tmp_path / f"valid{suffix}")},
            "train": {"max_steps": 2, "validate_every": 2, "threads": 1, "precision": "fp32", "batch_tokens": 400,
                      "select": {"metric": "accuracy"}, "init": {"from": str(bert_run)}},
            "output_dir": str(tmp_path / "run")}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = runner.invoke(app, ["train", str(tmp_path / "spec.yaml")], env=ENV)
    assert result.exit_code == 0, result.output
    assert "head: the source's is a SentenceEmbedding" in result.output and "it starts new" in result.output
    statuses = json.loads((tmp_path / "run" / "init.json").read_text())["tensors"]
    assert {s for n, s in statuses.items() if n.startswith("head.")} == {"new"}
    assert {s for n, s in statuses.items() if not n.startswith("head.")} == {"loaded"}
    vectors = runner.invoke(app, ["embed", str(tmp_path / "run"), "--pooling", "cls"], input="the cat\n", env=ENV)
    assert vectors.exit_code == 0, vectors.output  # any encoder's states pool into vectors
    assert len(json.loads(vectors.stdout)) == 16


def test_inspect_shows_the_pooling_head(bert_run: Path) -> None:
    result = runner.invoke(app, ["inspect", str(bert_run)], env=ENV)
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "output head" in line)
    assert "sentence_embedding" in row and "pooled into one vector" in row and "│      0 │" in row
