"""Multi30k (Task 1, raw en/de/fr): the built-in data set, fetched from a mirror folder or the
upstream repository pinned to one commit, every file checked against its sha256."""

from __future__ import annotations

import hashlib
import http.client
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO

from tbuild.builder.schema import DATASETS, DataSpec, Multi30kDataset

from ..errors import DataError
from .corpus import SPLITS, split_files

COMMIT = "a3d2e0d26b56f3846f66a952536ffed4e401d05a"
OFFICIAL_URL = f"https://raw.githubusercontent.com/multi30k/dataset/{COMMIT}/data/task1/raw"
MIRROR_ENV = "TBUILD_MULTI30K_MIRROR"
LANGS = ("en", "de", "fr")
# local split name -> upstream name
LOCAL_SPLITS = {"train": "train", "val": "val", "test2016": "test_2016_flickr"}

SHA256 = {
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
    "test2016.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test2016.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test2016.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
}
CHUNK = 1 << 16


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _copy_checked(source: BinaryIO, final: Path, origin: str) -> None:
    """Stream ``source`` into a temp file next to ``final``, check its sha256, rename atomically.
    Nothing is left behind on any failure."""
    expected = SHA256[final.name]
    fd, tmp_name = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for chunk in iter(lambda: source.read(CHUNK), b""):
                digest.update(chunk)
                out.write(chunk)
        actual = digest.hexdigest()
        if actual != expected:
            raise DataError(
                f"{final.name}: sha256 mismatch (from {origin}): expected {expected}, got {actual}"
            )
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


def _from_mirror(mirror: Path, final: Path, upstream: str) -> None:
    for candidate in (mirror / final.name, mirror / upstream):
        if candidate.is_file():
            try:
                with candidate.open("rb") as f:
                    _copy_checked(f, final, str(candidate))
            except OSError as e:
                raise DataError(f"{final.name}: cannot copy from mirror {candidate}: {e}") from None
            return
    raise DataError(f"Multi30k mirror {mirror} has no {final.name} (nor {upstream})")


def _download(url: str, final: Path, timeout: float) -> None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            _copy_checked(response, final, url)
    except (OSError, http.client.HTTPException) as e:
        if isinstance(e, urllib.error.HTTPError):
            reason = f"HTTP {e.code} {e.reason}"
        else:
            reason = getattr(e, "reason", None) or e
        raise DataError(
            f"cannot download {url}: {reason}; offline? pass --mirror DIR or set {MIRROR_ENV} "
            "to a folder with the Multi30k .gz files"
        ) from None


def fetch_multi30k(
    dest: Path,
    mirror: Path | None = None,
    base_url: str = OFFICIAL_URL,
    langs: Iterable[str] = LANGS,
    splits: Iterable[str] = tuple(LOCAL_SPLITS),
    *,
    timeout: float = 60.0,
) -> list[Path]:
    """Put ``<split>.<lang>.gz`` into ``dest``; return the files written (verified ones are skipped).

    Source: ``mirror`` (or ``$TBUILD_MULTI30K_MIRROR``) if set, else ``base_url`` (upstream names)."""
    langs, splits = tuple(langs), tuple(splits)
    for lang in langs:
        if lang not in LANGS:
            raise DataError(f"Multi30k has no language {lang!r}; choose from {', '.join(LANGS)}")
    for split in splits:
        if split not in LOCAL_SPLITS:
            raise DataError(f"Multi30k has no split {split!r}; choose from {', '.join(LOCAL_SPLITS)}")
    if mirror is None and os.environ.get(MIRROR_ENV):
        mirror = Path(os.environ[MIRROR_ENV])
    if mirror is not None and not mirror.is_dir():
        raise DataError(f"Multi30k mirror is not a folder: {mirror}")
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DataError(f"cannot create {dest}: {e.strerror or e}") from None
    written: list[Path] = []
    for split in splits:
        for lang in langs:
            final = dest / f"{split}.{lang}.gz"
            if final.is_file() and sha256_of(final) == SHA256[final.name]:
                continue
            upstream = f"{LOCAL_SPLITS[split]}.{lang}.gz"
            if mirror is not None:
                _from_mirror(mirror, final, upstream)
            else:
                _download(f"{base_url.rstrip('/')}/{upstream}", final, timeout)
            written.append(final)
    return written




@DATASETS.register(Multi30kDataset)
class Multi30k:
    """The ``multi30k`` data set: fetches the files of any split whose files are missing."""

    def __init__(self, spec: Multi30kDataset) -> None:
        self.spec = spec

    def ensure(self, data: DataSpec, log: Callable[[str], None]) -> None:
        langs = (data.source_lang, data.target_lang)
        unknown = [lang for lang in langs if lang not in LANGS]
        if unknown:
            raise DataError(f"data.dataset multi30k has languages {', '.join(LANGS)}, not {', '.join(unknown)}")
        for split in SPLITS:
            if getattr(data, split) is None:
                continue
            missing = [p for p in split_files(data, split) if not p.exists()]
            if not missing:
                continue
            dest = missing[0].parent
            log(f"data.{split}: {missing[0]} is missing; fetching Multi30k into {dest}")
            fetch_multi30k(dest, langs=langs)
            still = [p for p in split_files(data, split) if not p.exists()]
            if still:
                names = ", ".join(f"{s}.<lang>.gz" for s in LOCAL_SPLITS)
                raise DataError(f"data.{split}: {still[0]} not found; Multi30k provides {names} in {dest}")
