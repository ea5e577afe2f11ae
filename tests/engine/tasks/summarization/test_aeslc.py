"""The aeslc data set: an email file read as its body and subject (the annotators' subjects left out), a split
read alike from a tree of files and from GitHub's archive of the repository, checked by its count and the sha256
of its written lines (a mismatch refused in one line), and (where $TBUILD_DATA_MIRROR holds AESLC) the three
official splits written as pinned."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tbuild.engine.errors import DataError
from tbuild.engine.tasks.summarization import aeslc

DEV = ("Hi Phillip,  This is to confirm\nour meeting.\n@ bdixson@kgas.com.\n\n@subject\nMeeting  10/30\n\n"
       "@ann0\nmeeting confirmation\n\n@ann1\nmeeting\n\n@ann2\nconfirm")
TRAIN = "John,\nAs discussed, the exposure is $57MM.\n\n@subject\nAIG positions"


def test_an_email_is_its_body_and_original_subject() -> None:
    assert aeslc.email(DEV, "x") == ("Hi Phillip, This is to confirm our meeting. @ bdixson@kgas.com.", "Meeting 10/30")
    assert aeslc.email(TRAIN, "x") == ("John, As discussed, the exposure is $57MM.", "AIG positions")
    with pytest.raises(DataError, match="x: not an AESLC email"):
        aeslc.email("no subject here", "x")


def write_tree(root: Path) -> None:
    """Two dev emails, named so that file-name order differs from writing order."""
    folder = root / aeslc.FOLDER / "dev"
    folder.mkdir(parents=True)
    (folder / "b_inbox_2.subject").write_text(DEV)
    (folder / "a_sent_10.subject").write_text(TRAIN)


def archive_of(root: Path, path: Path) -> None:
    """GitHub's archive layout: AESLC-<commit>/enron_subject_line/..., the files in another order."""
    with tarfile.open(path, "w:gz") as tar:
        for file in sorted((root / aeslc.FOLDER).rglob("*.subject"), reverse=True):
            data = file.read_bytes()
            info = tarfile.TarInfo(f"AESLC-{aeslc.COMMIT}/{file.relative_to(root).as_posix()}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def digests(pairs: list[tuple[str, str]]) -> tuple[str, str]:
    return tuple(hashlib.sha256("".join(p[i] + "\n" for p in pairs).encode()).hexdigest() for i in (0, 1))


def test_a_split_reads_the_same_from_a_tree_and_an_archive_and_is_checked(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    write_tree(tmp_path)
    archive_of(tmp_path, tmp_path / "a.tar.gz")
    tree = aeslc.from_tree(tmp_path, "valid")
    assert tree == aeslc.from_archive(tmp_path / "a.tar.gz", "valid") == [aeslc.email(TRAIN, ""), aeslc.email(DEV, "")]
    monkeypatch.setitem(aeslc.EMAILS, "valid", 2)
    assert aeslc.checked("valid", tree, digests(tree)) == tree
    with pytest.raises(DataError, match=r"data.valid: AESLC's subject lines have sha256 .*, expected 0+ \(commit"):
        aeslc.checked("valid", tree, (digests(tree)[0], "0" * 64))
    with pytest.raises(DataError, match="data.valid: 1 AESLC emails, expected 2"):
        aeslc.checked("valid", tree[:1], digests(tree))
    (tmp_path / "broken.tar.gz").write_bytes(b"not gzip")
    with pytest.raises(DataError, match="not a readable AESLC archive"):
        aeslc.from_archive(tmp_path / "broken.tar.gz", "valid")


def spec(tmp_path: Path) -> Path:
    data = {"dataset": "aeslc", "train": str(tmp_path / "data" / "train"), "valid": str(tmp_path / "data" / "dev"),
            "test": str(tmp_path / "data" / "test")}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"task": "summarization", "data": data}))
    return path


def test_a_mirror_that_is_not_the_pinned_corpus_is_refused_in_one_line(tmp_path: Path) -> None:
    write_tree(tmp_path / "mirror" / "aeslc")
    result = CliRunner().invoke(app, ["data", "fetch", str(spec(tmp_path)), "--mirror", str(tmp_path / "mirror")])
    assert result.exit_code == 2 and "AESLC emails, expected" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "data" / "dev.body").exists()


def test_the_official_splits_are_written_as_pinned(tmp_path: Path) -> None:
    mirror = Path(os.environ.get("TBUILD_DATA_MIRROR", "")) / "aeslc"
    if not os.environ.get("TBUILD_DATA_MIRROR") or not (mirror / aeslc.FOLDER).is_dir():
        pytest.skip("AESLC is not in $TBUILD_DATA_MIRROR/aeslc")
    result = CliRunner().invoke(app, ["data", "fetch", str(spec(tmp_path))])
    assert result.exit_code == 0, result.output
    for split, prefix in (("train", "train"), ("valid", "dev"), ("test", "test")):
        for side, digest in zip(("body", "subject"), aeslc.SHA256[split], strict=True):
            written = (tmp_path / "data" / f"{prefix}.{side}").read_bytes()
            assert written.count(b"\n") == aeslc.EMAILS[split] and hashlib.sha256(written).hexdigest() == digest
