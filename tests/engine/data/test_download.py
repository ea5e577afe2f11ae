"""The download helper against a local HTTP server: whole, resumed (Range), restarted (200 to a
Range), refused (checksum, size), 404, unreachable, and copied from a mirror folder."""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path

import pytest

from tbuild.engine.data.download import Pinned, fetch, resolve_mirror
from tbuild.engine.errors import DataError
from tests.engine.data.conftest import Site

BODY = bytes(range(256)) * 400  # 102400 bytes


def pin(url: str, body: bytes = BODY) -> Pinned:
    return Pinned(url, sha256=hashlib.sha256(body).hexdigest(), size=len(body))


def test_download_whole(tmp_path: Path, site: Site) -> None:
    site.files["/a.tgz"] = BODY
    fetch(pin(f"{site.url}/a.tgz"), tmp_path / "a.tgz", progress=False)
    assert (tmp_path / "a.tgz").read_bytes() == BODY and sorted(tmp_path.iterdir()) == [tmp_path / "a.tgz"]
    assert site.requests == [("/a.tgz", None)]


def test_dropped_connection_is_resumed_with_a_range_request(tmp_path: Path, site: Site) -> None:
    site.files["/a.tgz"] = BODY
    site.drop.add("/a.tgz")
    fetch(pin(f"{site.url}/a.tgz"), tmp_path / "a.tgz", progress=False)
    assert (tmp_path / "a.tgz").read_bytes() == BODY and sorted(tmp_path.iterdir()) == [tmp_path / "a.tgz"]
    assert site.requests == [("/a.tgz", None), ("/a.tgz", f"bytes={len(BODY) // 2}-")]


def test_part_file_left_by_an_earlier_run_is_resumed(tmp_path: Path, site: Site) -> None:
    site.files["/a.tgz"] = BODY
    (tmp_path / "a.tgz.part").write_bytes(BODY[:1000])
    fetch(pin(f"{site.url}/a.tgz"), tmp_path / "a.tgz", progress=True)  # the bar goes to (captured) stderr
    assert (tmp_path / "a.tgz").read_bytes() == BODY and not (tmp_path / "a.tgz.part").exists()
    assert site.requests == [("/a.tgz", "bytes=1000-")]


def test_a_200_answer_to_a_range_request_restarts(tmp_path: Path, site: Site) -> None:
    site.files["/a.tgz"] = BODY
    site.ranges = False
    (tmp_path / "a.tgz.part").write_bytes(b"stale bytes of another file")
    fetch(pin(f"{site.url}/a.tgz"), tmp_path / "a.tgz", progress=False)
    assert (tmp_path / "a.tgz").read_bytes() == BODY


def test_checksum_mismatch_is_refused_leaving_nothing(tmp_path: Path, site: Site) -> None:
    site.files["/a.tgz"] = BODY[:-1] + b"X"
    pinned = pin(f"{site.url}/a.tgz")
    with pytest.raises(DataError) as info:
        fetch(pinned, tmp_path / "a.tgz", progress=False)
    actual = hashlib.sha256(BODY[:-1] + b"X").hexdigest()
    assert str(info.value) == (f"a.tgz: sha256 mismatch (from {pinned.url}): expected {pinned.sha256}, "
                               f"got {actual}")
    assert list(tmp_path.iterdir()) == []


def test_size_mismatch_is_refused_leaving_nothing(tmp_path: Path, site: Site) -> None:
    site.files["/a.tgz"] = BODY[:100]
    pinned = Pinned(f"{site.url}/a.tgz", size=len(BODY))
    with pytest.raises(DataError, match=rf"^a\.tgz: size mismatch \(from .*\): expected {len(BODY)} bytes, got 100$"):
        fetch(pinned, tmp_path / "a.tgz", progress=False)
    assert list(tmp_path.iterdir()) == []


def test_md5_pin(tmp_path: Path, site: Site) -> None:
    site.files["/t.tgz"] = BODY
    fetch(Pinned(f"{site.url}/t.tgz", md5=hashlib.md5(BODY).hexdigest()), tmp_path / "t.tgz", progress=False)
    with pytest.raises(DataError, match=r"^u\.tgz: md5 mismatch .*expected 0+, got "):
        fetch(Pinned(f"{site.url}/t.tgz", md5="0" * 32), tmp_path / "u.tgz", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.tgz"]


def test_http_404_is_one_line_with_url_status_and_hint(tmp_path: Path, site: Site) -> None:
    with pytest.raises(DataError) as info:
        fetch(pin(f"{site.url}/nope.tgz"), tmp_path / "nope.tgz", progress=False)
    assert str(info.value) == (f"cannot download {site.url}/nope.tgz: HTTP 404 Not Found; offline? set "
                               "TBUILD_DATA_MIRROR to a folder with nope.tgz (tbuild data fetch also takes "
                               "--mirror DIR)")
    assert list(tmp_path.iterdir()) == []


def test_unreachable_server(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens once the block ends
    with pytest.raises(DataError, match=rf"^cannot download http://127\.0\.0\.1:{port}/a\.tgz: .*--mirror DIR"):
        fetch(pin(f"http://127.0.0.1:{port}/a.tgz"), tmp_path / "a.tgz", progress=False, timeout=5)
    assert list(tmp_path.iterdir()) == []


def test_mirror_copy_by_local_or_upstream_name(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "up.tgz").write_bytes(BODY)
    fetch(pin("http://nowhere.invalid/up.tgz"), tmp_path / "out" / "local.tgz", mirror=mirror, progress=False)
    assert (tmp_path / "out" / "local.tgz").read_bytes() == BODY
    (mirror / "up.tgz").write_bytes(b"tampered")
    with pytest.raises(DataError, match=r"^up\.tgz: sha256 mismatch \(from .*mirror/up\.tgz\)"):
        fetch(pin("http://nowhere.invalid/up.tgz"), tmp_path / "out" / "up.tgz", mirror=mirror, progress=False)
    with pytest.raises(DataError, match=r"^mirror .* has no other\.tgz \(nor gone\.tgz\)$"):
        fetch(pin("http://nowhere.invalid/gone.tgz"), tmp_path / "out" / "other.tgz", mirror=mirror)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["local.tgz"]


def test_resolve_mirror_from_the_argument_or_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TBUILD_DATA_MIRROR", raising=False)
    assert resolve_mirror(None, "wmt14") is None
    assert resolve_mirror(tmp_path, "wmt14") == tmp_path
    monkeypatch.setenv("TBUILD_DATA_MIRROR", str(tmp_path))
    assert resolve_mirror(None, "wmt14") == tmp_path
    other = tmp_path / "other"
    other.mkdir()
    assert resolve_mirror(other, "wmt14") == other  # the argument wins
    monkeypatch.setenv("TBUILD_DATA_MIRROR", "")
    assert resolve_mirror(None, "wmt14") is None  # set but empty: unset


def test_resolve_mirror_takes_the_data_sets_subfolder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "multi30k").mkdir()
    (tmp_path / "wmt14").write_bytes(b"")  # a file of that name is no subfolder
    assert resolve_mirror(tmp_path, "multi30k") == tmp_path / "multi30k"
    assert resolve_mirror(tmp_path, "wmt14") == tmp_path
    monkeypatch.setenv("TBUILD_DATA_MIRROR", str(tmp_path))
    assert resolve_mirror(None, "multi30k") == tmp_path / "multi30k"


def test_resolve_mirror_refuses_a_missing_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TBUILD_DATA_MIRROR", raising=False)
    with pytest.raises(DataError, match=r"^wmt14 mirror is not a folder: .*absent$"):
        resolve_mirror(tmp_path / "absent", "wmt14")
    monkeypatch.setenv("TBUILD_DATA_MIRROR", str(tmp_path / "gone"))
    with pytest.raises(DataError, match=r"^multi30k mirror is not a folder: .*gone \(from \$TBUILD_DATA_MIRROR\)$"):
        resolve_mirror(None, "multi30k")


def test_a_name_lookup_that_hangs_is_bounded_by_the_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An offline machine's lookup can wait far longer than urlopen's timeout: it is given up after the
    timeout, one line with the hint, and nothing is left behind (no empty folder)."""
    import threading
    import time

    release = threading.Event()
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: release.wait(30) and [])
    started = time.monotonic()
    with pytest.raises(DataError, match=r"cannot download https://example\.invalid/a\.tgz: no answer looking up "
                                        r"example\.invalid within 0\.3 s; offline\?"):
        fetch(pin("https://example.invalid/a.tgz"), tmp_path / "cache" / "sub" / "a.tgz", progress=False, timeout=0.3)
    release.set()
    assert time.monotonic() - started < 5 and list(tmp_path.iterdir()) == []


def test_a_failed_download_leaves_no_empty_folder_but_keeps_a_resumable_part(tmp_path: Path, site: Site) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(DataError, match="cannot download"):
        fetch(pin(f"http://127.0.0.1:{port}/a.tgz"), tmp_path / "cache" / "a.tgz", progress=False)
    assert list(tmp_path.iterdir()) == []  # the next call does not find an empty cache folder
    (tmp_path / "kept").mkdir()
    with pytest.raises(DataError):
        fetch(pin(f"http://127.0.0.1:{port}/a.tgz"), tmp_path / "kept" / "a.tgz", progress=False)
    assert (tmp_path / "kept").is_dir()  # a folder that was there stays
    site.files["/a.tgz"] = BODY
    site.drop.add("/a.tgz")
    fetch(pin(f"{site.url}/a.tgz"), tmp_path / "new" / "a.tgz", progress=False)  # dropped, then resumed
    assert (tmp_path / "new" / "a.tgz").read_bytes() == BODY


def test_a_failed_extraction_leaves_nothing_half_written(tmp_path: Path) -> None:
    import io
    import tarfile

    from tbuild.engine.data.wmt14 import _extract_all

    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        for name in ("sgm/a.sgm", "sgm/b.sgm"):
            info = tarfile.TarInfo(name)
            info.size = 4000
            tar.addfile(info, io.BytesIO(bytes(4000)))
    good = tmp_path / "good.tgz"
    good.write_bytes(data.getvalue())
    raw = tmp_path / "raw"
    raw.mkdir()
    _extract_all(good, raw)
    assert sorted(p.name for p in raw.iterdir()) == ["sgm"] and len(list((raw / "sgm").iterdir())) == 2
    cut = tmp_path / "cut.tgz"
    cut.write_bytes(data.getvalue()[: len(data.getvalue()) // 2])  # a truncated archive
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(DataError, match="cannot extract"):
        _extract_all(cut, other)
    assert list(other.iterdir()) == [] and not cut.exists()
