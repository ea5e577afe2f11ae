"""The ``aeslc`` data set: AESLC, the Annotated Enron Subject Line Corpus (Zhang and Tetreault 2019, "This Email
Could Save Your Life: Introducing the Task of Email Subject Line Generation"; CC BY-NC-SA 4.0: research use and
redistribution, not commercial), each email's body → its subject line, 14,436 / 1,960 / 1,906 emails (the
official splits). The authors' repository at one commit is read from a mirror folder holding its
``enron_subject_line/`` tree, else from GitHub's archive of that commit (built on the fly: its bytes are not
pinned, so what is checked is what is used: the sha256 of each split's converted body and subject lines). Each
split is written as PREFIX.body and PREFIX.subject, one email a line (whitespace collapsed), in the order of the
files' names. Torch-free: the task's declaration declares it."""

from __future__ import annotations

import hashlib
import tarfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Literal

from tbuild.builder.spec import DATASETS, DatasetSpec

from ...data.download import Pinned, download, offline_hint, resolve_mirror
from ...errors import DataError
from .written import Log, Pairs, WrittenPairs, one_line

COMMIT = "7afc087a1cc234d07121f0d4a2d87102ddceabc2"  # ryanzhumich/AESLC master; the data unchanged since 615a317
ARCHIVE = Pinned(f"https://github.com/ryanzhumich/AESLC/archive/{COMMIT}.tar.gz")
FOLDER = "enron_subject_line"
UPSTREAM = {"train": "train", "valid": "dev", "test": "test"}  # a spec's split -> the corpus's folder
EMAILS = {"train": 14436, "valid": 1960, "test": 1906}
SHA256 = {  # of each split's lines as written (body, subject): one "\n"-ended line per email
    "train": ("c050428a13acb63bd6bb6f143d1b67743bdd886c100ab431edd9be4b016c7e06",
              "8e4f715cbb75365662d1f1b6ee3afd6a84a83ba0c5771a1bb3a83fca7737f8ee"),
    "valid": ("b58c0ca9c0b4874dafc731622d20d48cd135d69932cae67cc3149937a33250f3",
              "61a8031937e38c3b59b3fcfccbd4e10af9b949d5bc9bb25f4aa593aaee46002a"),
    "test": ("809f48cc55daba198d83417f1b09affd3119dbc68996b7343421a2a8d69f0be4",
             "5f1b71cef4c3e0be60d59b03fff0e3a8563fb95a27e44eadc271e482809ab25e"),
}
MIRROR_NAME = "aeslc"  # $TBUILD_DATA_MIRROR/aeslc/enron_subject_line/{train,dev,test}/*.subject
SUBJECT = "\n\n@subject\n"
HINT = offline_hint(f"AESLC's {FOLDER}/ folder")


@DATASETS.declare
class AeslcDataset(DatasetSpec):
    """AESLC (a summarization spec's data: ``task: summarization``): an email's body → its subject line;
    data.train, data.valid and data.test are the file prefixes of the official train, dev and test splits,
    read and written when missing."""

    kind: Literal["aeslc"] = "aeslc"

    @property
    def suffixes(self) -> tuple[str, str]:
        return "body", "subject"


def email(text: str, name: str) -> tuple[str, str]:
    """A ``.subject`` file's (body, subject): the text before its one ``@subject`` line, and the line after it
    (the annotators' subjects of dev and test files, after it, left out)."""
    body, found, rest = text.partition(SUBJECT)
    if not found:
        raise DataError(f"{name}: not an AESLC email (no @subject line)")
    return one_line(body), one_line(rest.split("\n\n@ann", 1)[0])


def checked(split: str, found: Pairs, expected: tuple[str, str] | None = None) -> Pairs:
    """``found`` if it is the split as pinned (its number of emails, the sha256 of its written lines)."""
    if len(found) != EMAILS[split]:
        raise DataError(f"data.{split}: {len(found)} AESLC emails, expected {EMAILS[split]}")
    for side, want in zip(("body", "subject"), expected or SHA256[split], strict=True):
        lines = [pair[side == "subject"] for pair in found]
        got = hashlib.sha256("".join(line + "\n" for line in lines).encode()).hexdigest()
        if got != want:
            raise DataError(f"data.{split}: AESLC's {side} lines have sha256 {got}, expected {want} (commit "
                            f"{COMMIT[:7]}); the source is not the pinned corpus")
    return found


def from_tree(folder: Path, split: str) -> Pairs:
    """A split's emails from an ``enron_subject_line/`` tree, by file name."""
    files = sorted((folder / FOLDER / UPSTREAM[split]).glob("*.subject"), key=lambda p: p.name)
    return [email(p.read_text(encoding="utf-8"), str(p)) for p in files]


def from_archive(archive: Path, split: str) -> Pairs:
    """A split's emails from GitHub's archive of the repository (``AESLC-<commit>/enron_subject_line/...``)."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            return [email(text, name) for name, text in sorted(_members(tar, UPSTREAM[split]))]
    except (OSError, tarfile.TarError, UnicodeDecodeError) as e:
        raise DataError(f"{archive}: not a readable AESLC archive ({e})") from None


def _members(tar: tarfile.TarFile, folder: str) -> Iterator[tuple[str, str]]:
    for member in tar:
        path = PurePosixPath(member.name)
        if member.isfile() and path.suffix == ".subject" and path.parts[-3:-1] == (FOLDER, folder):
            extracted = tar.extractfile(member)
            if extracted is not None:
                yield path.name, extracted.read().decode("utf-8")


@DATASETS.register(AeslcDataset)
class Aeslc(WrittenPairs):
    """Reads a split's emails from the mirror's tree, else from the commit's archive (downloaded into
    ``downloads/`` beside the split's prefix), checks them and writes their pairs."""

    name = "AESLC"

    def pairs(self, split: str, dest: Path, log: Log) -> Pairs:
        mirror = resolve_mirror(self.mirror, MIRROR_NAME)
        if mirror is not None:
            if not (mirror / FOLDER).is_dir():
                raise DataError(f"AESLC mirror {mirror} has no {FOLDER}/ folder")
            return checked(split, from_tree(mirror, split))
        archive = dest / "downloads" / f"AESLC-{COMMIT}.tar.gz"
        if not archive.is_file():
            download(ARCHIVE, archive, progress=self.progress, hint=HINT)
        return checked(split, from_archive(archive, split))
