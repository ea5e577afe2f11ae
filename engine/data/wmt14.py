"""WMT 2014 as in §5.1: English-German ("the standard WMT 2014 English-German dataset consisting of
about 4.5 million sentence pairs": Europarl v7 + Common Crawl + News Commentary v9) and English-French
("the significantly larger WMT 2014 English-French dataset consisting of 36M sentences": the same three
plus the UN corpus and the 10^9 French-English corpus), newstest2013 for validation, newstest2014 for test.

Training archives are pinned by URL, size and sha256 (as in TensorFlow Datasets' checksum file),
downloaded (or copied from a mirror folder) into ``downloads/`` beside the training files, and
their members for the pair streamed out of the tars (giga-fren's are gzip files inside a plain tar)
into the split's two files. The test sets come from
sacreBLEU's own catalogue (``wmt13``, ``wmt14/full``), so they are the text sacreBLEU scores
against; their archives are fetched by the same helper into the place sacreBLEU reads them from
(``$SACREBLEU``, default ``~/.sacrebleu``). The paper's "36M" English-French pairs are what the
usual filter keeps of the 40.8M (at most 175 words a side, length ratio 1.5): ``data.max_words`` and
``data.max_words_ratio``, which specs/wmt14/enfr-*.yaml set."""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, BinaryIO

from tbuild.builder.spec import DATASETS, DataSpec, Wmt14Dataset

from ..errors import DataError
from .corpus import SPLITS, split_files
from .download import Pinned, fetch, offline_hint, resolve_mirror
from .provider import Provider

Log = Callable[[str], None]
CHUNK = 1 << 20


@dataclass(frozen=True)
class Corpus:
    """A training archive and the prefix of its members for a pair (``PREFIX.de``, ``PREFIX.en``;
    ``PREFIX.fr.gz``, ``PREFIX.en.gz`` where ``gzipped``)."""

    name: str
    archive: Pinned
    members: str
    gzipped: bool = False


# Pinned as in TensorFlow Datasets' url_checksums for wmt14_translate.
EUROPARL = Pinned("http://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz", size=657632379,
                  sha256="0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7")
COMMONCRAWL = Pinned("http://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz", size=918311367,
                     sha256="c7a74e2ea01ac6c920123108627e35278d4ccb5701e15428ffa34de86fa3a9e5")
NEWS_COMMENTARY = Pinned("http://www.statmt.org/wmt14/training-parallel-nc-v9.tgz", size=80418416,
                         sha256="cb8953f292298e6877ae433c98912b927cb0766b303f4540512ddd286c748485")
UN = Pinned("http://www.statmt.org/wmt13/training-parallel-un.tgz", size=2365634246,
            sha256="29141b5c1eba149a94f7a59d3b1a834b2e47fe0f8758d68dcd77a3d3f497ee47")
GIGA_FREN = Pinned("http://www.statmt.org/wmt10/training-giga-fren.tar", size=2595102720,
                   sha256="3ff8319f6919393520559bfbc7ad6a747ec81b3abc7be9993b338d4b017b4d9a")
# The other language of each pair (with English) -> its corpora, in this order (as TensorFlow
# Datasets' wmt14_translate concatenates them).
TRAINING = {
    "de": (
        Corpus("Europarl v7", EUROPARL, "training/europarl-v7.de-en"),
        Corpus("Common Crawl", COMMONCRAWL, "commoncrawl.de-en"),
        Corpus("News Commentary v9", NEWS_COMMENTARY, "training/news-commentary-v9.de-en"),
    ),
    "fr": (
        Corpus("Europarl v7", EUROPARL, "training/europarl-v7.fr-en"),
        Corpus("Common Crawl", COMMONCRAWL, "commoncrawl.fr-en"),
        Corpus("UN", UN, "un/undoc.2000.fr-en"),
        Corpus("News Commentary v9", NEWS_COMMENTARY, "training/news-commentary-v9.fr-en"),
        Corpus("10^9 French-English", GIGA_FREN, "giga-fren.release2.fixed", gzipped=True),
    ),
}
# split -> the sacreBLEU test set filling it
TEST_SETS = {"valid": "wmt13", "test": "wmt14/full"}
HINT = offline_hint("the WMT14 archives (training-parallel-*.tgz, training-giga-fren.tar, test.tgz, test-full.tgz)")


@DATASETS.register(Wmt14Dataset)
class Wmt14(Provider):
    """The ``wmt14`` data set: puts each configured split's two files in place when either is
    missing (train: the pair's corpora; valid: newstest2013; test: newstest2014)."""

    def __init__(self, spec: Wmt14Dataset, *, mirror: Path | None = None, progress: bool | None = None) -> None:
        self.spec, self.mirror, self.progress = spec, mirror, progress

    def ensure(self, data: DataSpec, log: Log, splits: Sequence[str] = SPLITS) -> None:
        src, tgt = data.source_lang, data.target_lang
        other = ({src, tgt} - {"en"}).pop() if "en" in (src, tgt) and src != tgt else None
        if other not in TRAINING:
            raise DataError(f"data.dataset wmt14 provides English-German and English-French (§5.1), either "
                            f"direction, not {src}-{tgt}")
        corpora = TRAINING[other]
        mirror = resolve_mirror(self.mirror, "wmt14")
        for split in splits:
            if getattr(data, split) is None:
                continue
            files = split_files(data, split)
            if all(p.exists() for p in files):
                continue
            if split == "train":
                archives = files[0].parent / "downloads"
                size = sum(c.archive.size or 0 for c in corpora) / 1e9
                log(f"data.train: {files[0]} or {files[1]} is missing; fetching the WMT14 {src}-{tgt} training "
                    f"corpora ({size:.1f} GB) into {archives}")
                paths = [self._fetch(c.archive, archives / c.archive.name, mirror) for c in corpora]
                log(f"data.train: extracting {src}-{tgt} into {files[0]} and {files[1]}")
                lines = extract_training(list(zip(paths, corpora, strict=True)), files, (src, tgt))
                log(f"data.train: {lines} sentence pairs")
            else:
                name = TEST_SETS[split]
                log(f"data.{split}: {files[0]} or {files[1]} is missing; writing sacreBLEU's {name} {src}-{tgt}")
                self._test_set(name, files, f"{src}-{tgt}", mirror)

    def _fetch(self, pinned: Pinned, final: Path, mirror: Path | None) -> Path:
        if not final.is_file():  # checked when it was put there
            fetch(pinned, final, mirror=mirror, progress=self.progress, hint=HINT)
        return final

    def _test_set(self, name: str, files: tuple[Path, Path], langpair: str, mirror: Path | None) -> None:
        """Write sacreBLEU's source and (first) reference of ``langpair`` to ``files``."""
        from sacrebleu.dataset import DATASETS as SACREBLEU

        test_set = SACREBLEU[name]
        raw = Path(test_set._rawdir)  # where sacreBLEU looks for (and extracts) its archives
        for url, md5 in zip(test_set.data, test_set.md5 or [None] * len(test_set.data), strict=True):
            # sacreBLEU's own name for a downloaded archive: it then skips its download (and extraction)
            archive = raw / test_set._get_tarball_filename(url)
            if not (archive.is_file() and archive.stat().st_size):
                self._fetch(Pinned(url, md5=md5), archive, mirror)
                _extract_all(archive, raw)
        try:
            source, references = test_set.get_source_file(langpair), test_set.get_reference_files(langpair)
        except (OSError, tarfile.TarError) as e:
            raise DataError(f"sacreBLEU {name}: cannot read {langpair} under {raw}: {e}") from None
        write_parallel((Path(source), Path(references[0])), files, f"sacreBLEU {name} {langpair}")


def _extract_all(archive: Path, dest: Path) -> None:
    """Extract ``archive`` into a temporary folder in ``dest``, then rename each of its entries into
    place: a failed extraction leaves nothing half-written that sacreBLEU would take as extracted."""
    temp = Path(tempfile.mkdtemp(prefix=".extracting-", dir=dest))
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(temp, filter="data")
        for entry in temp.iterdir():
            target = dest / entry.name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)  # an older extraction of the same folder
            os.replace(entry, target)
    except (OSError, EOFError, tarfile.TarError) as e:  # EOFError: a truncated gzip stream
        archive.unlink(missing_ok=True)
        raise DataError(f"{archive}: cannot extract ({e}); removed, run again to fetch it anew") from None
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def extract_training(archives: list[tuple[Path, Corpus]], files: tuple[Path, Path], langs: tuple[str, str]) -> int:
    """Stream the members ``PREFIX.<lang>`` (``.gz`` where gzipped) of each (archive, corpus) into
    ``files`` (source, target), archive after archive; both files appear only once both are whole.
    Returns the number of lines, refusing archives whose two sides differ."""
    total = 0
    with _atomic_pair(files) as outs:
        for path, corpus in archives:
            gz = ".gz" if corpus.gzipped else ""
            wanted = {f"{corpus.members}.{lang}{gz}": side for side, lang in enumerate(langs)}
            counts: dict[str, int] = {}
            try:
                # a stream (members in archive order, no seeking), compressed (.tgz) or not (.tar)
                with tarfile.open(path, "r|*") as tar:
                    for member in tar:
                        name = member.name.removeprefix("./")
                        if name in wanted and member.isfile():
                            stream: Any = tar.extractfile(member)
                            if corpus.gzipped:
                                stream = gzip.GzipFile(fileobj=stream)
                            counts[name] = _copy_lines(stream, outs[wanted[name]])
            except (OSError, tarfile.TarError, EOFError) as e:
                raise DataError(f"{path}: cannot read the archive ({e}); delete it to fetch it again") from None
            missing = [name for name in wanted if name not in counts]
            if missing:
                raise DataError(f"{path}: no member {' or '.join(missing)}")
            (a, b) = (counts[name] for name in wanted)
            if a != b:
                first, second = wanted
                raise DataError(f"{path}: line counts differ: {a} lines in {first} but {b} lines in {second}")
            total += a
    return total


def write_parallel(sources: tuple[Path, Path], files: tuple[Path, Path], what: str) -> None:
    """Copy two plain-text files to ``files`` (both appear at once), refusing unequal line counts."""
    with _atomic_pair(files) as outs:
        counts = []
        for source, out in zip(sources, outs, strict=True):
            with source.open("rb") as f:
                counts.append(_copy_lines(f, out))
        if counts[0] != counts[1]:
            raise DataError(f"{what}: line counts differ: {counts[0]} lines in {sources[0]} but "
                            f"{counts[1]} lines in {sources[1]}")


def _copy_lines(source: BinaryIO, out: IO[bytes]) -> int:
    """Copy ``source`` to ``out``, ending it with a newline; the number of lines (b"\\n" only, as
    ``corpus.iter_lines`` splits them)."""
    lines, last = 0, b"\n"
    for chunk in iter(lambda: source.read(CHUNK), b""):
        out.write(chunk)
        lines += chunk.count(b"\n")
        last = chunk[-1:]
    if last != b"\n":
        out.write(b"\n")
        lines += 1
    return lines


@contextlib.contextmanager
def _atomic_pair(files: tuple[Path, Path]) -> Iterator[list[Any]]:
    """Two files written under temporary names beside them (gzip if named .gz), fsynced and renamed
    into place only when the block succeeds; removed if it fails."""
    temps = [path.with_name(f".{path.name}.tmp") for path in files]
    try:
        for path in files:
            path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.ExitStack() as stack:
            raws = [stack.enter_context(temp.open("wb")) for temp in temps]
            outs = [stack.enter_context(gzip.GzipFile(fileobj=raw, mode="wb", mtime=0)) if path.suffix == ".gz"
                    else raw for raw, path in zip(raws, files, strict=True)]
            yield outs
            for out, raw in zip(outs, raws, strict=True):
                if out is not raw:
                    out.close()
                raw.flush()
                os.fsync(raw.fileno())
        for temp, path in zip(temps, files, strict=True):
            os.replace(temp, path)
    except OSError as e:
        raise DataError(f"cannot write {files[0]} and {files[1]}: {e.strerror or e}") from None
    finally:
        for temp in temps:
            temp.unlink(missing_ok=True)
