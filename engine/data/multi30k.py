"""Multi30k (Task 1, raw en/de/fr): the built-in data set, fetched from a mirror folder or the
upstream repository pinned to one commit, every file checked against its size and sha256."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from tbuild.builder.spec import DATASETS, DataSpec, Multi30kDataset

from ..errors import DataError
from .corpus import SPLITS, split_paths
from .download import Pinned, copy_checked, download, new_folder, offline_hint, resolve_mirror, sha256_of
from .provider import Provider

COMMIT = "a3d2e0d26b56f3846f66a952536ffed4e401d05a"
OFFICIAL_URL = f"https://raw.githubusercontent.com/multi30k/dataset/{COMMIT}/data/task1/raw"
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
# sizes in bytes of the files above (as in the shared mirror)
SIZE = {
    "train.en.gz": 568929, "train.de.gz": 637044, "train.fr.gz": 604242,
    "val.en.gz": 21650, "val.de.gz": 24681, "val.fr.gz": 23001,
    "test2016.en.gz": 21077, "test2016.de.gz": 22890, "test2016.fr.gz": 22310,
}
HINT = offline_hint("the Multi30k .gz files")


def _from_mirror(mirror: Path, final: Path, upstream: str) -> None:
    pinned = Pinned(upstream, sha256=SHA256[final.name], size=SIZE[final.name])
    for candidate in (mirror / final.name, mirror / upstream):
        if candidate.is_file():
            copy_checked(candidate, final, pinned, progress=False)
            return
    raise DataError(f"Multi30k mirror {mirror} has no {final.name} (nor {upstream})")


def fetch_multi30k(
    dest: Path,
    mirror: Path | None = None,
    base_url: str = OFFICIAL_URL,
    langs: Iterable[str] = LANGS,
    splits: Iterable[str] = tuple(LOCAL_SPLITS),
    *,
    timeout: float = 60.0,
    progress: bool | None = None,
) -> list[Path]:
    """Put ``<split>.<lang>.gz`` into ``dest``; return the files written (verified ones are skipped).

    Source: ``mirror`` (else ``$TBUILD_DATA_MIRROR``; either may hold the files or a ``multi30k/``
    subfolder with them) if set, else ``base_url`` (upstream names). ``progress``: a progress bar on
    stderr (None: on a terminal)."""
    langs, splits = tuple(langs), tuple(splits)
    for lang in langs:
        if lang not in LANGS:
            raise DataError(f"Multi30k has no language {lang!r}; choose from {', '.join(LANGS)}")
    for split in splits:
        if split not in LOCAL_SPLITS:
            raise DataError(f"Multi30k has no split {split!r}; choose from {', '.join(LOCAL_SPLITS)}")
    mirror = resolve_mirror(mirror, "multi30k")
    written: list[Path] = []
    with new_folder(dest):  # removed again if nothing could be put in it
        for split in splits:
            for lang in langs:
                if _fetch_file(dest, split, lang, mirror, base_url, progress, timeout):
                    written.append(dest / f"{split}.{lang}.gz")
    return written


def _fetch_file(dest: Path, split: str, lang: str, mirror: Path | None, base_url: str, progress: bool | None,
                timeout: float) -> bool:
    """Put ``<split>.<lang>.gz`` into ``dest`` unless it is there and verified; whether it was written."""
    final = dest / f"{split}.{lang}.gz"
    if final.is_file() and sha256_of(final) == SHA256[final.name]:
        return False
    upstream = f"{LOCAL_SPLITS[split]}.{lang}.gz"
    if mirror is not None:
        _from_mirror(mirror, final, upstream)
    else:
        pinned = Pinned(f"{base_url.rstrip('/')}/{upstream}", sha256=SHA256[final.name], size=SIZE[final.name])
        download(pinned, final, progress=progress, hint=HINT, timeout=timeout)
    return True


@DATASETS.register(Multi30kDataset)
class Multi30k(Provider):
    """The ``multi30k`` data set: fetches the files of any split whose files are missing."""

    def __init__(self, spec: Multi30kDataset, *, mirror: Path | None = None, progress: bool | None = None) -> None:
        self.spec, self.mirror, self.progress = spec, mirror, progress

    def ensure(self, data: DataSpec, log: Callable[[str], None], splits: Sequence[str] = SPLITS) -> None:
        # a language model's text (side set): that language alone
        langs = (self.spec.side,) if self.spec.side is not None else (data.source_lang, data.target_lang)
        unknown = [lang for lang in langs if lang not in LANGS]
        if unknown:
            raise DataError(f"data.dataset multi30k has languages {', '.join(LANGS)}, not {', '.join(unknown)}")
        for split in splits:
            if getattr(data, split) is None:
                continue
            missing = [p for p in split_paths(data, split) if not p.exists()]
            if not missing:
                continue
            dest = missing[0].parent
            log(f"data.{split}: {missing[0]} is missing; fetching Multi30k into {dest}")
            fetch_multi30k(dest, self.mirror, langs=langs, progress=self.progress)
            still = [p for p in split_paths(data, split) if not p.exists()]
            if still:
                names = ", ".join(f"{s}.<lang>.gz" for s in LOCAL_SPLITS)
                raise DataError(f"data.{split}: {still[0]} not found; Multi30k provides {names} in {dest}")
