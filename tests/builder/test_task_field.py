"""``task:`` names a spec's task: declared, it resolves and is dumped (a run's spec.yaml); absent, the task is the one
the spec's claims give and the spec dumps as it did before the field (every spec under specs/); an unknown name
is refused at its line, with the tasks there are."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.builder import load_spec
from tbuild.builder.spec import Spec
from tbuild.builder.spec.tasks import declarations, task_name
from tbuild.cli.app import app
from tests.builder.spec_files import error_of, write
from tests.conftest import REPO

SPECS = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "specs").rglob("*.yaml")
               if "sweeps" not in p.parts and "tune" not in p.parts
               and "task" not in yaml.safe_load(p.read_text(encoding="utf-8")))  # a spec declaring its task: below


def test_a_spec_declaring_its_task_keeps_it() -> None:
    spec = load_spec(REPO / "specs/examples/summarization.yaml").spec
    assert spec.model_dump(mode="json")["task"] == "summarization" == spec.task_name()


def test_the_built_in_tasks_are_declared() -> None:
    assert set(declarations()) >= {"translation", "language_model", "prefix_lm", "tagging", "classification",
                                   "masked_lm", "parsing", "sentence_embedding"}


def test_a_declared_task_resolves_and_is_dumped(tmp_path: Path) -> None:
    path = write(tmp_path, "model: {kind: encoder_decoder}\ntask: parsing\n")
    spec = load_spec(path).spec
    assert spec.task_name() == "parsing" and spec.declared_task().metrics["f1"] is True
    assert spec.model_dump(mode="json")["task"] == "parsing"
    assert Spec.model_validate(spec.model_dump(mode="json")).task_name() == "parsing"  # spec.yaml reads back


def test_an_override_names_the_task(tmp_path: Path) -> None:
    path = write(tmp_path, "model: {kind: encoder_decoder}\n")
    assert load_spec(path, ["task=parsing"]).spec.task_name() == "parsing"
    assert load_spec(path).spec.task_name() == "translation"


def test_an_unknown_task_is_refused_at_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "model: {kind: encoder_decoder}\ntask: summarisation\n")
    message = error_of(path)
    assert message.startswith(f"{path}:2:1: task: unknown task 'summarisation'; the tasks are: classification, ")
    assert all(name in message for name in declarations())


def test_train_refuses_an_unknown_task_in_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, "model: {kind: encoder_decoder}\n")
    result = CliRunner().invoke(app, ["train", str(path), "-s", "task=nope"])
    assert result.exit_code == 2 and "task: unknown task 'nope'" in result.output, result.output


@pytest.mark.parametrize("path", SPECS)
def test_a_spec_without_task_dumps_as_before_and_names_its_task_the_same(path: str) -> None:
    """No ``task`` key in the dump of a spec that sets none; naming the task its claims give changes nothing
    but that key (same resolved form otherwise, same architecture hash)."""
    spec = load_spec(REPO / path).spec
    dump = spec.model_dump(mode="json")
    assert "task" not in dump and spec.task_name() == task_name(spec)
    named = Spec.model_validate(dump | {"task": spec.task_name()})
    assert named.model_dump(mode="json") == {**dump, "task": spec.task_name()}
    assert named.architecture_hash() == spec.architecture_hash() and named.task_name() == spec.task_name()


# train.select.metric each task takes: as before the metrics were the tasks' (the Literal and whole.py's checks)
METRICS = {"translation": {"ppl", "bleu", "bleu_lowercase", "chrf"}, "prefix_lm": {"ppl", "bleu", "bleu_lowercase",
           "chrf"}, "parsing": {"ppl", "bleu", "bleu_lowercase", "chrf", "f1"}, "language_model": {"ppl"},
           **{name: {"ppl", "accuracy"} for name in ("tagging", "classification", "masked_lm", "sentence_embedding")}}


def test_each_task_offers_the_metrics_it_took() -> None:
    assert {name: set(declarations()[name].metrics) for name in METRICS} == METRICS
    assert all(d.metrics[d.select] is False for d in declarations().values())  # ppl: lower is better


def test_a_metric_the_task_does_not_offer_is_refused_at_its_line(tmp_path: Path) -> None:
    text = "data: {train: a, valid: b}\ntrain:\n  select: {metric: %s}\n"
    assert error_of(write(tmp_path, text % "rouge")).startswith(
        f"{tmp_path / 's.yaml'}:3:12: train.select.metric: rouge is not a metric of the translation task: choose "
        "one of ppl, bleu, bleu_lowercase, chrf")
    assert "f1 (EVALB) scores parse trees" in error_of(write(tmp_path, text % "f1"))
    assert "accuracy scores a tagger's labels" in error_of(write(tmp_path, text % "accuracy"))


def test_a_named_task_checks_the_spec(tmp_path: Path) -> None:
    """``task: parsing`` on data without trees takes no f1 (EVALB scores trees), as parsing by its claims would."""
    text = "task: parsing\ndata: {train: a, valid: b}\ntrain:\n  select: {metric: f1}\n"
    assert "train.select.metric: f1 (EVALB) scores parse trees" in error_of(write(tmp_path, text))
    spec = load_spec(write(tmp_path, text.replace("f1", "chrf"))).spec
    assert spec.task_name() == "parsing" and spec.declared_task().metrics["chrf"]


def test_a_named_task_may_not_hold_another_tasks_data_set_or_head(tmp_path: Path) -> None:
    """A head or a data set makes a run its task; naming another task is refused at the line of ``task``. A model
    kind does not: a summarizer is an encoder-decoder, as a translator is."""
    tagging = "task: translation\nmodel: {kind: encoder_only, head: {kind: token_classification}}\n" \
              "data: {dataset: {kind: tagging}}\n"
    assert error_of(write(tmp_path, tagging)) == (
        f"{tmp_path / 's.yaml'}:1:1: task: translation does not fit model.head kind 'token_classification', "
        "which makes the run the tagging task: name task tagging, or leave task out")
    assert "data.dataset kind 'treebank', which makes the run the parsing task" in error_of(
        write(tmp_path, "task: summarization\ndata: {dataset: {kind: treebank}}\n"))
    assert load_spec(write(tmp_path, "task: summarization\nmodel: {kind: encoder_decoder}\n")).spec.task_name() == (
        "summarization")
    assert load_spec(write(tmp_path, tagging.replace("translation", "tagging"))).spec.task_name() == "tagging"
