"""Multi30k fetching: mirror copy, download from a local HTTP server, sha256 checks."""

from __future__ import annotations

import functools
import hashlib
import http.server
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tbuild.engine.data.multi30k import COMMIT, LOCAL_SPLITS, OFFICIAL_URL, SHA256, fetch_multi30k, sha256_of
from tbuild.engine.errors import DataError

SMALL = ("val", "test2016")


@pytest.fixture(autouse=True)
def _no_env_mirror(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TBUILD_DATA_MIRROR", raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


def test_sha_table_matches_the_files(multi30k: Path) -> None:
    assert sorted(SHA256) == sorted(p.name for p in multi30k.glob("*.gz"))
    for name, digest in SHA256.items():
        assert sha256_of(multi30k / name) == digest, name
    pinned = f"https://raw.githubusercontent.com/multi30k/dataset/{COMMIT}/data/task1/raw"
    assert pinned == OFFICIAL_URL
    assert COMMIT == "a3d2e0d26b56f3846f66a952536ffed4e401d05a"


def test_mirror_copy_then_skip(tmp_path: Path, multi30k: Path) -> None:
    written = fetch_multi30k(tmp_path, mirror=multi30k, langs=("en", "de"), splits=SMALL)
    names = ["val.en.gz", "val.de.gz", "test2016.en.gz", "test2016.de.gz"]
    assert written == [tmp_path / n for n in names]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)
    assert all((tmp_path / n).read_bytes() == (multi30k / n).read_bytes() for n in names)
    assert fetch_multi30k(tmp_path, mirror=multi30k, langs=("en", "de"), splits=SMALL) == []


def test_mirror_from_env_and_bad_local_file_replaced(tmp_path: Path, multi30k: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TBUILD_DATA_MIRROR", str(multi30k))
    (tmp_path / "val.fr.gz").write_bytes(b"stale")
    assert fetch_multi30k(tmp_path, langs=("fr",), splits=("val",)) == [tmp_path / "val.fr.gz"]
    assert sha256_of(tmp_path / "val.fr.gz") == SHA256["val.fr.gz"]


def test_mirror_missing_file_or_folder(tmp_path: Path, multi30k: Path) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    shutil.copy(multi30k / "val.en.gz", mirror)
    with pytest.raises(DataError, match=r"mirror .* has no val\.de\.gz \(nor val\.de\.gz\)"):
        fetch_multi30k(tmp_path / "out", mirror=mirror, langs=("en", "de"), splits=("val",))
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["val.en.gz"]
    with pytest.raises(DataError, match="mirror is not a folder"):
        fetch_multi30k(tmp_path / "out", mirror=tmp_path / "absent")


def test_unknown_language_or_split(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no language 'cs'"):
        fetch_multi30k(tmp_path, mirror=tmp_path, langs=("cs",))
    with pytest.raises(DataError, match="no split 'test2017'"):
        fetch_multi30k(tmp_path, mirror=tmp_path, splits=("test2017",))


class _Quiet(http.server.SimpleHTTPRequestHandler):
    requested: list[str] = []

    def log_message(self, *args: object) -> None:
        _Quiet.requested.append(self.path)


@pytest.fixture
def server(tmp_path: Path, multi30k: Path) -> Iterator[tuple[str, Path]]:
    """An HTTP server on 127.0.0.1 laid out like raw.githubusercontent.com (upstream names)."""
    root = tmp_path / "www"
    raw = root / "multi30k" / "dataset" / COMMIT / "data" / "task1" / "raw"
    raw.mkdir(parents=True)
    for local, upstream in LOCAL_SPLITS.items():
        if local in SMALL:
            for lang in ("en", "de"):
                shutil.copy(multi30k / f"{local}.{lang}.gz", raw / f"{upstream}.{lang}.gz")
    _Quiet.requested = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/multi30k/dataset/{COMMIT}/data/task1/raw", raw
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_download_uses_upstream_names(tmp_path: Path, server: tuple[str, Path]) -> None:
    url, _ = server
    dest = tmp_path / "dest"
    written = fetch_multi30k(dest, base_url=url, langs=("en", "de"), splits=SMALL)
    assert [p.name for p in written] == ["val.en.gz", "val.de.gz", "test2016.en.gz", "test2016.de.gz"]
    assert all(sha256_of(p) == SHA256[p.name] for p in written)
    assert sorted(p.name for p in dest.iterdir()) == sorted(p.name for p in written)  # no temp files
    assert any(r.endswith("/test_2016_flickr.de.gz") for r in _Quiet.requested)


def test_corrupted_download_is_a_sha_error_leaving_nothing(tmp_path: Path, server: tuple[str, Path]) -> None:
    url, raw = server
    (raw / "val.de.gz").write_bytes(b"\x1f\x8b tampered")
    dest = tmp_path / "dest"
    with pytest.raises(DataError) as info:
        fetch_multi30k(dest, base_url=url, langs=("de",), splits=("val",))
    message = str(info.value)
    actual = hashlib.sha256(b"\x1f\x8b tampered").hexdigest()
    assert message.startswith("val.de.gz: sha256 mismatch")
    assert f"expected {SHA256['val.de.gz']}, got {actual}" in message
    assert not dest.exists()  # nor an empty folder for the next call to trust


def test_http_error_mentions_mirror(tmp_path: Path, server: tuple[str, Path]) -> None:
    url, raw = server
    (raw / "val.de.gz").unlink()
    with pytest.raises(DataError) as info:
        fetch_multi30k(tmp_path / "dest", base_url=url, langs=("de",), splits=("val",))
    message = str(info.value)
    assert message.startswith(f"cannot download {url}/val.de.gz: HTTP 404 ")
    assert "--mirror" in message and "TBUILD_DATA_MIRROR" in message and "\n" not in message
    assert not (tmp_path / "dest").exists()  # nor an empty folder


def test_unreachable_server_mentions_mirror(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    pattern = r"cannot download http://127\.0\.0\.1:\d+/val\.en\.gz: .*--mirror DIR"
    with pytest.raises(DataError, match=pattern):
        fetch_multi30k(tmp_path, base_url=f"http://127.0.0.1:{port}", langs=("en",), splits=("val",),
                       timeout=5)
    assert list(tmp_path.iterdir()) == []


def test_cli_fetches_then_reports_present(tmp_path: Path, multi30k: Path) -> None:
    from typer.testing import CliRunner

    from tbuild.cli.data import data_app

    runner = CliRunner()
    dest = tmp_path / "m30k"
    args = ["multi30k", "--output", str(dest)]
    result = runner.invoke(data_app, args, env={"TBUILD_DATA_MIRROR": str(multi30k), "COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert f"fetched {dest / 'train.en.gz'}" in result.stdout and "9 files in" in result.stdout
    assert sorted(p.name for p in dest.iterdir()) == sorted(SHA256)
    result = runner.invoke(data_app, [*args, "--mirror", str(multi30k)], env={"COLUMNS": "300"})
    assert result.exit_code == 0 and "already present" in result.stdout
    result = runner.invoke(data_app, [*args, "--mirror", str(tmp_path / "nowhere")], env={"COLUMNS": "300"})
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip() == f"error: multi30k mirror is not a folder: {tmp_path / 'nowhere'}"
