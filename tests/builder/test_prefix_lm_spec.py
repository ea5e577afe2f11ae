"""model.prefix_lm: where it is accepted (decoder_only with pairs), the one-line errors (file:line: field,
exit 2) where it is not, and a decoder_only spec with pairs and no prefix_lm still refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tbuild.builder import SpecError, load_spec
from tbuild.cli.app import app

from ..conftest import REPO

PAIRS = "data:\n  dataset: multi30k\n"


def error_of(path: Path) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return str(info.value)


def write(tmp: Path, text: str) -> Path:
    path = tmp / "s.yaml"
    path.write_text(text)
    return path


def test_the_shipped_spec_is_a_decoder_only_translator() -> None:
    spec = load_spec(REPO / "specs/examples/graphs/multi30k-prefix-lm.yaml").spec
    assert spec.model.kind == "decoder_only" and spec.model.prefix_lm is not None
    assert (spec.model.prefix_lm.attention, spec.model.prefix_lm.loss) == ("prefix", "target")


def test_prefix_lm_on_another_kind_names_the_field(tmp_path: Path) -> None:
    p = write(tmp_path, "model:\n  d_model: 16\n  prefix_lm: {attention: prefix}\n" + PAIRS)
    assert error_of(p).startswith(f"{p}:3:3: model.prefix_lm: prefix_lm makes a decoder_only model translate")


def test_a_bad_attention_or_loss_names_the_line(tmp_path: Path) -> None:
    p = write(tmp_path, "model:\n  kind: decoder_only\n  prefix_lm:\n    attention: sideways\n" + PAIRS)
    assert error_of(p).startswith(f"{p}:4:5: model.prefix_lm.attention:")
    p = write(tmp_path, "model:\n  kind: decoder_only\n  prefix_lm:\n    loss: source\n" + PAIRS)
    assert error_of(p).startswith(f"{p}:4:5: model.prefix_lm.loss:")


def test_prefix_lm_with_text_data_is_refused(tmp_path: Path) -> None:
    p = write(tmp_path, "model:\n  kind: decoder_only\n  prefix_lm: {}\ndata:\n  dataset: {kind: multi30k, side: de}\n")
    assert "a prefix LM (model.prefix_lm) translates source-target pairs" in error_of(p)


def test_decoder_only_with_pairs_and_no_prefix_lm_stays_refused(tmp_path: Path) -> None:
    p = write(tmp_path, "model:\n  kind: decoder_only\n" + PAIRS)
    msg = error_of(p)
    assert msg.startswith(f"{p}:2:3: model.kind: a decoder_only model trains on one side of text")
    assert "model.prefix_lm" in msg and "\n" not in msg


def test_the_cli_refuses_in_one_line_with_exit_2(tmp_path: Path) -> None:
    p = write(tmp_path, "model:\n  d_model: 16\n  prefix_lm: {attention: prefix}\n" + PAIRS)
    result = CliRunner().invoke(app, ["validate", str(p)])
    assert result.exit_code == 2
    assert f"{p}:3:3: model.prefix_lm:" in result.output and "Traceback" not in result.output
