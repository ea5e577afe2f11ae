"""The treebank data set: the NLTK sample downloaded (served locally), refused on a checksum mismatch,
copied from a mirror folder; a user's WSJ folder; bad trees leave nothing written."""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from pathlib import Path

import pytest

from tbuild.builder.loader import load_spec
from tbuild.builder.spec import DataSpec
from tbuild.engine.data import treebank
from tbuild.engine.data.datasets import ensure_data
from tbuild.engine.data.download import Pinned
from tbuild.engine.errors import DataError
from tests.engine.data.conftest import Site


def tree(n: int) -> str:
    return f"( (S (NP-SBJ (NN w{n}) ) (VP (VBD ran) (NP (-NONE- *T*-1) )) (. .) ))\n"


def fake_zip(bad: int | None = None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for n in range(1, 200):
            z.writestr(f"treebank/combined/wsj_{n:04d}.mrg", tree(n) + ("( (S (NN x)" if n == bad else ""))
    return out.getvalue()


def data_spec(root: Path, **dataset: object) -> DataSpec:
    spec = {"data": {"dataset": {"kind": "treebank", **dataset}, "target_lang": "parse", "train": str(root / "train"),
                     "valid": str(root / "valid"), "test": str(root / "test")}}
    return load_spec(spec).spec.data


def serve(site: Site, monkeypatch: pytest.MonkeyPatch, body: bytes, sha256: str | None = None) -> None:
    site.files = {"/treebank.zip": body}
    pinned = Pinned(f"{site.url}/treebank.zip", sha256=sha256 or hashlib.sha256(body).hexdigest(), size=len(body))
    monkeypatch.setattr(treebank, "SAMPLE", pinned)
    monkeypatch.delenv("TBUILD_DATA_MIRROR", raising=False)


def test_downloads_the_sample_and_splits_it_by_file(tmp_path: Path, site: Site,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    serve(site, monkeypatch, fake_zip())
    data = data_spec(tmp_path)
    ensure_data(data)
    lines = {p.name: p.read_text().splitlines() for p in tmp_path.glob("*.*")}
    assert [len(lines[f"{s}.en"]) for s in ("train", "valid", "test")] == [159, 20, 20]
    assert lines["train.en"][0] == "w1 ran ." and lines["valid.en"][0] == "w160 ran ."
    assert lines["train.parse"][0] == "(S (NP XX )NP (VP XX )VP XX )S"
    assert lines["test.gold"][-1] == "(TOP (S (NP (NN w199)) (VP (VBD ran)) (. .)))"
    assert len(site.requests) == 1
    ensure_data(data)  # all there: nothing fetched again
    assert len(site.requests) == 1


def test_checksum_mismatch_is_refused_and_nothing_kept(tmp_path: Path, site: Site,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    serve(site, monkeypatch, fake_zip(), sha256="0" * 64)
    with pytest.raises(DataError, match="treebank.zip: sha256 mismatch"):
        ensure_data(data_spec(tmp_path))
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == []


def test_a_bad_tree_names_file_and_position_and_writes_nothing(tmp_path: Path, site: Site,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    serve(site, monkeypatch, fake_zip(bad=7))
    with pytest.raises(DataError, match=r"wsj_0007\.mrg: tree 2: unbalanced brackets"):
        ensure_data(data_spec(tmp_path))
    assert not list(tmp_path.glob("train.*"))


def test_from_the_mirror(tmp_path: Path) -> None:
    mirror = os.environ.get("TBUILD_DATA_MIRROR")
    if not mirror or not (Path(mirror) / "treebank-sample" / "treebank.zip").is_file():
        pytest.skip("the NLTK treebank sample is not in $TBUILD_DATA_MIRROR")
    assert treebank.SAMPLE.sha256 == "9da92d76c3666cfb6cddeaed0f7e86b344cce0f0928a286d439e555f19c37399"
    assert treebank.SAMPLE.url == ("https://raw.githubusercontent.com/nltk/nltk_data/"
                                   "5db857e6f7df11eabb5e5665836db9ec8df07e28/packages/corpora/treebank.zip")
    ensure_data(data_spec(tmp_path), splits=("valid", "test"))
    assert [len((tmp_path / f"{s}.gold").read_text().splitlines()) for s in ("valid", "test")] == [273, 245]
    assert not (tmp_path / "train.en").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match=r"mirror .*empty has no treebank\.zip"):
        ensure_data(data_spec(tmp_path / "other"), mirror=empty)


def test_wsj_folder_sections(tmp_path: Path) -> None:
    wsj = tmp_path / "wsj"
    for section in range(0, 25):
        (wsj / f"{section:02d}").mkdir(parents=True)
        (wsj / f"{section:02d}" / f"wsj_{section:02d}01.mrg").write_text(tree(section) + tree(section + 100))
    data = data_spec(tmp_path / "out", source="wsj", wsj=str(wsj), linearization="tags")
    ensure_data(data)
    train = (tmp_path / "out" / "train.en").read_text().splitlines()
    assert len(train) == 40 and train[0] == "w2 ran ." and train[-1] == "w121 ran ."
    assert (tmp_path / "out" / "test.en").read_text() == "w23 ran .\nw123 ran .\n"
    assert (tmp_path / "out" / "valid.parse").read_text().splitlines()[0] == "(S (NP NN )NP (VP VBD )VP . )S"
    (wsj / "23" / "wsj_2301.mrg").unlink()
    with pytest.raises(DataError, match=r"has no section 23"):
        ensure_data(data_spec(tmp_path / "again", source="wsj", wsj=str(wsj)))


def test_wsj_needs_its_folder() -> None:
    from tbuild.builder.loader import SpecError

    with pytest.raises(SpecError, match="source wsj needs the folder"):
        load_spec({"data": {"dataset": {"kind": "treebank", "source": "wsj"}}})


def test_brackets_are_whole_pieces(tmp_path: Path) -> None:
    from tbuild.builder.spec import TokenizerSpec
    from tbuild.engine.data.tokenizer import Tokenizer, whole_target_tokens

    spec = load_spec({"data": {"dataset": "treebank"}}).spec
    targets = ["(S (NP XX XX )NP (VP XX (NP XX )NP )VP XX )S", "(S (NP XX )NP (VP XX )VP )S"] * 20
    whole = whole_target_tokens(spec, targets)
    assert whole == ["(NP", "(S", "(VP", ")NP", ")S", ")VP", "XX"]
    assert whole_target_tokens(load_spec({}).spec, targets) == []  # translation: subwords as before
    words = ["the dog saw a cat .", "It purred ."] * 20
    tok = Tokenizer.train(words + targets, TokenizerSpec(vocab_size=60), tmp_path / "spm", whole=whole)
    pieces = tok.sp.encode(targets[0], out_type=str)
    assert pieces == ["▁" + t for t in targets[0].split()]
    assert tok.decode(tok.encode([targets[1]])[0]) == targets[1]
