"""The wmt14 data set end to end on a tiny fake corpus: training archives with the real member names
(served on 127.0.0.1 or in a mirror folder, pinned by their own size and sha256), and sacreBLEU's
test-set catalogue pointed at fake test.tgz / test-full.tgz under a temporary $SACREBLEU."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest
from sacrebleu.dataset import DATASETS as SACREBLEU
from sacrebleu.dataset.fake_sgml import FakeSGMLDataset

from tbuild.engine.data import wmt14
from tbuild.engine.data.corpus import read_parallel, split_files
from tbuild.engine.data.datasets import ensure_data
from tbuild.engine.data.download import Pinned
from tbuild.engine.errors import DataError
from tests.engine.data.conftest import Site
from tests.engine.data.test_corpus import data_spec

# archive name -> {member: text}; the de-en members as in the real archives, plus ones to skip
ARCHIVES = {
    "training-parallel-europarl-v7.tgz": {
        "training/europarl-v7.fr-en.en": "not this\n",
        "training/europarl-v7.de-en.de": "Europarl eins\nEuroparl zwei\n",
        "training/europarl-v7.de-en.en": "Europarl one\nEuroparl two\n",
    },
    "training-parallel-commoncrawl.tgz": {
        "./commoncrawl.de-en.en": "Crawl one",  # no final newline: one is added
        "./commoncrawl.de-en.de": "Crawl eins",
    },
    "training-parallel-nc-v9.tgz": {
        "training/news-commentary-v9.de-en.de": "NC eins\n",
        "training/news-commentary-v9.de-en.en": "NC one\n",
        "training/news-commentary-v9.cs-en.cs": "ne\n",
    },
    "test.tgz": {  # sacreBLEU keeps the <seg> lines, whitespace collapsed
        "test/newstest2013-src.en.sgm": '<doc docid="a">\n<seg id="1">Hello  world </seg>\n<seg id="2">Bye</seg>\n',
        "test/newstest2013-src.de.sgm": '<doc docid="a">\n<seg id="1">Hallo Welt</seg>\n<seg id="2">Tschüss</seg>\n',
        "test/newstest2013-src.fr.sgm": '<doc docid="a">\n<seg id="1">Bonjour</seg>\n<seg id="2">Salut</seg>\n',
    },
    "test-full.tgz": {
        "test-full/newstest2014-deen-src.en.sgm": '<doc docid="b">\n<seg id="1">Good day</seg>\n</doc>\n',
        "test-full/newstest2014-deen-ref.de.sgm": '<doc docid="b">\n<seg id="1">Guten Tag</seg>\n</doc>\n',
        "test-full/newstest2014-deen-src.de.sgm": '<doc docid="c">\n<seg id="1">Gute Nacht</seg>\n</doc>\n',
        "test-full/newstest2014-deen-ref.en.sgm": '<doc docid="c">\n<seg id="1">Good night</seg>\n</doc>\n',
        "test-full/newstest2014-fren-src.en.sgm": '<doc docid="d">\n<seg id="1">Good evening</seg>\n</doc>\n',
        "test-full/newstest2014-fren-ref.fr.sgm": '<doc docid="d">\n<seg id="1">Bonsoir</seg>\n</doc>\n',
    },
}
MEMBERS = ("training/europarl-v7.de-en", "commoncrawl.de-en", "training/news-commentary-v9.de-en")


def tgz(members: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in members.items():
            raw = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    return buffer.getvalue()


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    """The fake archives, pinned in wmt14.TRAINING and sacreBLEU's catalogue (at base URL
    ``http://127.0.0.1:1`` until a test serves them); $SACREBLEU is under tmp_path."""
    monkeypatch.delenv("TBUILD_DATA_MIRROR", raising=False)
    archives = {name: tgz(members) for name, members in ARCHIVES.items()}
    point_at(monkeypatch, archives, "http://127.0.0.1:1", tmp_path / "sacrebleu")
    return archives


def point_at(monkeypatch: pytest.MonkeyPatch, archives: dict[str, bytes], base: str, sacrebleu_dir: Path) -> None:
    training = tuple(
        wmt14.Corpus(c.name, Pinned(f"{base}/{name}", sha256=hashlib.sha256(archives[name]).hexdigest(),
                                    size=len(archives[name])), members)
        for c, name, members in zip(wmt14.TRAINING["de"], list(ARCHIVES)[:3], MEMBERS, strict=True)
    )
    monkeypatch.setitem(wmt14.TRAINING, "de", training)
    monkeypatch.setattr("sacrebleu.dataset.base.SACREBLEU_DIR", str(sacrebleu_dir))
    for name, archive in (("wmt13", "test.tgz"), ("wmt14/full", "test-full.tgz")):
        real = SACREBLEU[name]
        pairs = {pair: real.langpairs[pair] for pair in ("en-de", "de-en", "en-fr")}
        fake = FakeSGMLDataset(name, data=[f"{base}/{archive}"], md5=[hashlib.md5(archives[archive]).hexdigest()],
                               langpairs=pairs)
        monkeypatch.setitem(SACREBLEU, name, fake)


def wmt_spec(folder: Path, **langs: str):  # noqa: ANN201 - DataSpec
    return data_spec(dataset="wmt14", train=str(folder / "train"), valid=str(folder / "newstest2013"),
                     test=str(folder / "newstest2014"), **langs)


def test_served_archives_end_to_end(tmp_path: Path, fake: dict[str, bytes], site: Site,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    site.files = {f"/{name}": body for name, body in fake.items()}
    point_at(monkeypatch, fake, site.url, tmp_path / "sacrebleu")
    data, logged = wmt_spec(tmp_path / "wmt"), []
    ensure_data(data, logged.append)
    train = read_parallel(*split_files(data, "train"), "data.train")
    assert train == (["Europarl one", "Europarl two", "Crawl one", "NC one"],
                     ["Europarl eins", "Europarl zwei", "Crawl eins", "NC eins"])
    assert read_parallel(*split_files(data, "valid"), "data.valid") == (["Hello world", "Bye"],
                                                                         ["Hallo Welt", "Tschüss"])
    assert read_parallel(*split_files(data, "test"), "data.test") == (["Good day"], ["Guten Tag"])
    assert sorted(p.name for p in (tmp_path / "wmt").iterdir()) == [
        "downloads", "newstest2013.de", "newstest2013.en", "newstest2014.de", "newstest2014.en",
        "train.de", "train.en"]
    assert sorted(p.name for p in (tmp_path / "wmt" / "downloads").iterdir()) == sorted(list(ARCHIVES)[:3])
    assert sorted(path for path, _ in site.requests) == sorted(site.files)
    assert any("4 sentence pairs" in line for line in logged)

    site.requests.clear()
    ensure_data(data)  # everything present: nothing fetched
    (tmp_path / "wmt" / "newstest2014.de").unlink()
    (tmp_path / "wmt" / "train.en").unlink()
    ensure_data(data)  # re-made from the archives already downloaded
    assert site.requests == []
    assert read_parallel(*split_files(data, "test"), "data.test") == (["Good day"], ["Guten Tag"])
    assert read_parallel(*split_files(data, "train"), "data.train") == train


def test_mirror_folder_de_en(tmp_path: Path, fake: dict[str, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for name, body in fake.items():
        (mirror / name).write_bytes(body)
    monkeypatch.setenv("TBUILD_DATA_MIRROR", str(mirror))
    data = wmt_spec(tmp_path / "wmt", source_lang="de", target_lang="en")
    ensure_data(data)
    assert read_parallel(*split_files(data, "train"), "data.train")[0] == [
        "Europarl eins", "Europarl zwei", "Crawl eins", "NC eins"]
    assert read_parallel(*split_files(data, "valid"), "data.valid") == (["Hallo Welt", "Tschüss"],
                                                                         ["Hello world", "Bye"])
    assert read_parallel(*split_files(data, "test"), "data.test") == (["Gute Nacht"], ["Good night"])
    assert (tmp_path / "sacrebleu" / "wmt13" / "raw" / "wmt13.test.tgz").read_bytes() == fake["test.tgz"]


def test_unequal_sides_are_refused_leaving_no_training_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TBUILD_DATA_MIRROR", raising=False)
    members = dict(ARCHIVES["training-parallel-commoncrawl.tgz"], **{"./commoncrawl.de-en.de": "a\nb\nc\n"})
    archives = {name: tgz(m) for name, m in ARCHIVES.items()}
    archives["training-parallel-commoncrawl.tgz"] = tgz(members)
    point_at(monkeypatch, archives, "http://127.0.0.1:1", tmp_path / "sacrebleu")
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for name, body in archives.items():
        (mirror / name).write_bytes(body)
    data = data_spec(dataset="wmt14", train=str(tmp_path / "wmt" / "train"))
    with pytest.raises(DataError) as info:
        ensure_data(data, mirror=mirror)
    archive = tmp_path / "wmt" / "downloads" / "training-parallel-commoncrawl.tgz"
    assert str(info.value) == (f"{archive}: line counts differ: 1 lines in commoncrawl.de-en.en but 3 lines in "
                               "commoncrawl.de-en.de")
    assert sorted(p.name for p in (tmp_path / "wmt").iterdir()) == ["downloads"]


def test_archive_without_the_members(tmp_path: Path, fake: dict[str, bytes],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for name in fake:
        (mirror / name).write_bytes(fake[name])
    broken = tgz({"training/news-commentary-v9.de-en.de": "x\n"})
    (mirror / "training-parallel-nc-v9.tgz").write_bytes(broken)
    pinned = Pinned(wmt14.TRAINING["de"][2].archive.url, sha256=hashlib.sha256(broken).hexdigest())
    nc = wmt14.Corpus("NC", pinned, MEMBERS[2])
    monkeypatch.setitem(wmt14.TRAINING, "de", (*wmt14.TRAINING["de"][:2], nc))
    missing = r"training-parallel-nc-v9\.tgz: no member training/news-commentary-v9\.de-en\.en$"
    with pytest.raises(DataError, match=missing):
        ensure_data(data_spec(dataset="wmt14", train=str(tmp_path / "wmt" / "train")), mirror=mirror)


def test_other_languages_are_refused(tmp_path: Path) -> None:
    for src, tgt in (("en", "cs"), ("de", "fr"), ("en", "en")):
        with pytest.raises(DataError, match=rf"^data\.dataset wmt14 provides English-German and English-French "
                                            rf"\(§5\.1\), either direction, not {src}-{tgt}$"):
            ensure_data(wmt_spec(tmp_path, source_lang=src, target_lang=tgt))


def gz(text: str) -> bytes:
    import gzip

    return gzip.compress(text.encode())


def tar(members: dict[str, bytes]) -> bytes:
    """A plain (uncompressed) tar, as training-giga-fren.tar is."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as out:
        for name, raw in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            out.addfile(info, io.BytesIO(raw))
    return buffer.getvalue()


FR_ARCHIVES = {
    "training-parallel-europarl-v7.tgz": tgz({"training/europarl-v7.fr-en.en": "Europarl one\n",
                                              "training/europarl-v7.fr-en.fr": "Europarl un\n",
                                              "training/europarl-v7.de-en.de": "nicht\n"}),
    "training-parallel-commoncrawl.tgz": tgz({"commoncrawl.fr-en.en": "Crawl one\n",
                                              "commoncrawl.fr-en.fr": "Crawl un\n"}),
    "training-parallel-un.tgz": tgz({"un/undoc.2000.fr-en.en": "UN one\nUN two\n",
                                     "un/undoc.2000.fr-en.fr": "ONU un\nONU deux\n"}),
    "training-parallel-nc-v9.tgz": tgz({"training/news-commentary-v9.fr-en.en": "NC one\n",
                                        "training/news-commentary-v9.fr-en.fr": "NC un\n"}),
    "training-giga-fren.tar": tar({"giga-fren.release2.fixed.en.gz": gz("Giga one\nGiga two\n"),
                                   "giga-fren.release2.fixed.fr.gz": gz("Giga un\nGiga deux\n")}),
}


def pin_fr(monkeypatch: pytest.MonkeyPatch, archives: dict[str, bytes]) -> None:
    real = wmt14.TRAINING["fr"]
    names = list(FR_ARCHIVES)
    fr = tuple(wmt14.Corpus(c.name, Pinned(f"http://127.0.0.1:1/{name}", size=len(archives[name]),
                                           sha256=hashlib.sha256(FR_ARCHIVES[name]).hexdigest()), c.members, c.gzipped)
               for c, name in zip(real, names, strict=True))
    monkeypatch.setitem(wmt14.TRAINING, "fr", fr)


def test_english_french_from_a_mirror_gzip_inside_tar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """§5.1's five corpora in order, giga-fren's gzip members read out of its plain tar."""
    assert [c.archive.name for c in wmt14.TRAINING["fr"]] == list(FR_ARCHIVES)
    monkeypatch.delenv("TBUILD_DATA_MIRROR", raising=False)
    pin_fr(monkeypatch, FR_ARCHIVES)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for name, body in FR_ARCHIVES.items():
        (mirror / name).write_bytes(body)
    data, logged = data_spec(dataset="wmt14", train=str(tmp_path / "wmt" / "train"), target_lang="fr"), []
    ensure_data(data, logged.append, mirror=mirror)
    assert read_parallel(*split_files(data, "train"), "data.train") == (
        ["Europarl one", "Crawl one", "UN one", "UN two", "NC one", "Giga one", "Giga two"],
        ["Europarl un", "Crawl un", "ONU un", "ONU deux", "NC un", "Giga un", "Giga deux"])
    assert any("7 sentence pairs" in line for line in logged)
    french_first = data_spec(dataset="wmt14", train=str(tmp_path / "fr-en" / "train"), source_lang="fr",
                             target_lang="en")
    ensure_data(french_first, mirror=mirror)
    assert read_parallel(*split_files(french_first, "train"), "data.train")[0][-1] == "Giga deux"


def test_english_french_refuses_an_archive_that_fails_its_checksum(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TBUILD_DATA_MIRROR", raising=False)
    pin_fr(monkeypatch, FR_ARCHIVES)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for name, body in FR_ARCHIVES.items():
        (mirror / name).write_bytes(body)
    giga = FR_ARCHIVES["training-giga-fren.tar"]
    (mirror / "training-giga-fren.tar").write_bytes(giga[:-1] + bytes([giga[-1] ^ 1]))  # same size, one bit off
    with pytest.raises(DataError, match="training-giga-fren.tar"):
        ensure_data(data_spec(dataset="wmt14", train=str(tmp_path / "wmt" / "train"), target_lang="fr"),
                    mirror=mirror)
    assert not (tmp_path / "wmt" / "train.en").exists()


def test_offline_without_mirror_names_the_mirror_option(tmp_path: Path, fake: dict[str, bytes]) -> None:
    with pytest.raises(DataError, match=r"cannot download http://127\.0\.0\.1:1/training-parallel-europarl-v7\.tgz: "
                                        r".*set TBUILD_DATA_MIRROR to a folder with .*--mirror DIR"):
        ensure_data(data_spec(dataset="wmt14", train=str(tmp_path / "wmt" / "train")))
    assert not (tmp_path / "wmt").exists()  # nothing left, not even an empty folder


def test_reading_one_split_fetches_that_split_only(tmp_path: Path, fake: dict[str, bytes], site: Site,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Evaluating on newstest2014 must not download the 1.7 GB of training archives."""
    from tbuild.engine.data.datasets import read_split

    site.files = {f"/{name}": body for name, body in fake.items()}
    point_at(monkeypatch, fake, site.url, tmp_path / "sacrebleu")
    data = wmt_spec(tmp_path / "wmt")
    assert read_split(data, "test", lambda _: None) == (["Good day"], ["Guten Tag"])
    assert [path for path, _ in site.requests] == ["/test-full.tgz"]
    assert not (tmp_path / "wmt" / "train.en").exists()


def test_english_french_test_sets_come_from_sacrebleu(tmp_path: Path, fake: dict[str, bytes], site: Site,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """newstest2013 (valid) and newstest2014 full (test) for en-fr, as sacreBLEU's catalogue has them."""
    site.files = {f"/{name}": body for name, body in fake.items()}
    point_at(monkeypatch, fake, site.url, tmp_path / "sacrebleu")
    data = data_spec(dataset="wmt14", train=None, valid=str(tmp_path / "wmt" / "newstest2013"),
                     test=str(tmp_path / "wmt" / "newstest2014"), target_lang="fr")
    ensure_data(data)
    assert read_parallel(*split_files(data, "valid"), "data.valid") == (["Hello world", "Bye"],
                                                                         ["Bonjour", "Salut"])
    assert read_parallel(*split_files(data, "test"), "data.test") == (["Good evening"], ["Bonsoir"])
