"""The scitldr data set: records read as (abstract, TLDR or title) lines, a bad record named by file and line,
a mirror whose file fails its sha256 refused in one line, and (where $TBUILD_DATA_MIRROR holds SciTLDR-A) the
three splits written from the pinned files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.engine.errors import DataError
from tbuild.engine.tasks.summarization.scitldr import PAPERS, UPSTREAM_FOLDER, pairs

RECORD = {"source": ["We  study sparsity. ", "It emerges.\n"], "target": ["Sparsity emerges.", "A review's TLDR."],
          "title": "Sparsity  Emerges", "paper_id": "x"}


def test_a_record_is_its_abstract_and_first_tldr_or_its_title(tmp_path: Path) -> None:
    path = tmp_path / "dev.jsonl"
    path.write_text(json.dumps(RECORD) + "\n" + json.dumps(RECORD | {"target": ["Two."]}))  # no final newline
    assert pairs(path, "tldr") == [("We study sparsity. It emerges.", "Sparsity emerges."),
                                   ("We study sparsity. It emerges.", "Two.")]
    assert pairs(path, "title")[0] == ("We study sparsity. It emerges.", "Sparsity Emerges")
    path.write_text(json.dumps(RECORD) + "\n" + json.dumps({"source": ["no target"]}))
    with pytest.raises(DataError, match=r"dev.jsonl:2: not a SciTLDR-A record"):
        pairs(path, "tldr")


def spec(tmp_path: Path, target: str = "tldr") -> Path:
    data = {"dataset": {"kind": "scitldr", "target": target}, "train": str(tmp_path / "data" / "train"),
            "valid": str(tmp_path / "data" / "dev"), "test": str(tmp_path / "data" / "test")}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"task": "summarization", "data": data}))
    return path


def test_a_mirror_file_that_fails_its_checks_is_refused(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror" / "scitldr"
    mirror.mkdir(parents=True)
    for name in ("train", "dev", "test"):
        (mirror / f"{name}.jsonl").write_text(json.dumps(RECORD))
    result = CliRunner().invoke(app, ["data", "fetch", str(spec(tmp_path)), "--mirror", str(tmp_path / "mirror")])
    assert result.exit_code == 2 and "train.jsonl" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "data" / "train.abstract").exists()


def test_the_pinned_files_are_written_as_pairs(tmp_path: Path) -> None:
    mirror = Path(os.environ.get("TBUILD_DATA_MIRROR", "")) / "scitldr"
    if not os.environ.get("TBUILD_DATA_MIRROR") or not ((mirror / "dev.jsonl").is_file()
                                                         or (mirror / UPSTREAM_FOLDER / "dev.jsonl").is_file()):
        pytest.skip("SciTLDR-A is not in $TBUILD_DATA_MIRROR/scitldr")
    result = CliRunner().invoke(app, ["data", "fetch", str(spec(tmp_path, "title"))])
    assert result.exit_code == 0, result.output
    for split, prefix in (("train", "train"), ("valid", "dev"), ("test", "test")):
        abstracts = (tmp_path / "data" / f"{prefix}.abstract").read_text().splitlines()
        titles = (tmp_path / "data" / f"{prefix}.title").read_text().splitlines()
        assert len(abstracts) == len(titles) == PAPERS[split] and all(abstracts) and all(titles)
    first = json.loads((tmp_path / "data" / "downloads" / "dev.jsonl").read_text().splitlines()[0])
    assert (tmp_path / "data" / "dev.title").read_text().splitlines()[0] == " ".join(first["title"].split())
