"""The ``treebank`` data set (§6.3, English constituency parsing): Penn Treebank trees written as
parallel files, the words of each sentence → its linearized tree, and beside them the cleaned gold
trees that EVALB scores against. From NLTK's sample of the treebank (fetched from its official
address pinned to one commit, size, md5 and sha256 checked; a mirror folder offline) or from a
user's own LDC WSJ folder."""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from pathlib import Path

from tbuild.builder.spec import DATASETS, DataSpec, ParallelFiles, TreebankDataset

from ..errors import DataError
from ..files import atomic_write
from .corpus import SPLITS, iter_lines, split_files
from .download import Pinned, fetch, offline_hint, resolve_mirror, sha256_of
from .linearize import LEAF, leaf_text, linearize
from .provider import Provider
from .trees import Tree, read_treebank

Log = Callable[[str], None]

COMMIT = "5db857e6f7df11eabb5e5665836db9ec8df07e28"  # nltk/nltk_data; the blob is unchanged since 2016-08-21
SAMPLE = Pinned(f"https://raw.githubusercontent.com/nltk/nltk_data/{COMMIT}/packages/corpora/treebank.zip",
                sha256="9da92d76c3666cfb6cddeaed0f7e86b344cce0f0928a286d439e555f19c37399", size=1740034,
                md5="78c24a97940c2504d0ad35dd3f8a560b")
MIRROR_NAME = "treebank-sample"  # $TBUILD_DATA_MIRROR/treebank-sample/treebank.zip
# The sample's 199 files (WSJ 0001-0199) split by file number: about 80 / 10 / 10 % of the trees.
SAMPLE_FILES = {"train": range(1, 160), "valid": range(160, 180), "test": range(180, 200)}
# The standard WSJ split: sections 02-21 train, 22 development, 23 test (§6.3).
WSJ_SECTIONS = {"train": range(2, 22), "valid": range(22, 23), "test": range(23, 24)}
GOLD = "gold"
HINT = offline_hint("treebank.zip (NLTK's treebank sample)")


def gold_file(data: DataSpec, split: str) -> Path:
    """The cleaned gold trees of a split, one per line: PREFIX.gold beside PREFIX.<lang>."""
    value = getattr(data, split)
    if not isinstance(value, str):
        raise DataError(f"data.{split}: the treebank data set writes PREFIX.{data.source_lang}, "
                        f"PREFIX.{data.target_lang} and PREFIX.{GOLD}: give a prefix, not source/target files")
    return Path(f"{value}.{GOLD}")


@DATASETS.register(TreebankDataset)
class Treebank(Provider):
    """The ``treebank`` data set: writes each configured split's three files when any is missing."""

    def __init__(self, spec: TreebankDataset, *, mirror: Path | None = None, progress: bool | None = None) -> None:
        self.spec, self.mirror, self.progress = spec, mirror, progress
        self.leaves = spec.linearization

    def whole_targets(self, target: list[str]) -> list[str]:
        """Every distinct token of the linearized trees (a bracket, XX, a tag: one piece each); with
        lexicalized trees (``linearization: words``) only the brackets: the words stay in the pieces the source
        is split into, so the decoder can copy them."""
        tokens = {tok for line in target for tok in line.split()}
        return sorted(t for t in tokens if t.startswith(("(", ")")) or self.leaves != "words")

    def ensure(self, data: DataSpec, log: Log, splits: Sequence[str] = SPLITS) -> None:
        for split in splits:
            if getattr(data, split) is None:
                continue
            if isinstance(getattr(data, split), ParallelFiles):
                gold_file(data, split)  # the error
            files = (*split_files(data, split), gold_file(data, split))
            form = (self.spec.linearization, self.spec.order)
            if all(p.is_file() for p in files):
                written = written_form(files[1], files[0])
                if written == form:
                    continue
                why = f"{files[1]} holds {' '.join(written or ('no',))} trees, not {' '.join(form)}"
            else:
                why = f"{next(p for p in files if not p.is_file())} is missing"
            where = "NLTK's treebank sample" if self.spec.source == "nltk-sample" else f"WSJ in {self.spec.wsj}"
            log(f"data.{split}: {why}; writing the {split} trees of {where}")
            trees = list(self._trees(split, files[0].parent))  # all read (and checked) before any is written
            write_split(trees, files, *form)
            log(f"data.{split}: {len(trees)} trees, {sum(len(t.words()) for t in trees)} words")

    def _trees(self, split: str, dest: Path) -> Iterator[Tree]:
        if self.spec.source == "wsj":
            yield from wsj_trees(Path(self.spec.wsj or ""), WSJ_SECTIONS[split])
            return
        archive = dest / "downloads" / "treebank.zip"
        if not (archive.is_file() and sha256_of(archive) == SAMPLE.sha256):
            fetch(SAMPLE, archive, mirror=resolve_mirror(self.mirror, MIRROR_NAME), progress=self.progress,
                  hint=HINT)
        yield from sample_trees(archive, SAMPLE_FILES[split])


def sample_trees(archive: Path, numbers: range) -> Iterator[Tree]:
    """The cleaned trees of the sample's files ``wsj_NNNN.mrg`` numbered ``numbers``, in order."""
    try:
        with zipfile.ZipFile(archive) as z:
            for n in numbers:
                member = f"treebank/combined/wsj_{n:04d}.mrg"
                yield from read_treebank(z.read(member).decode("utf-8"), f"{archive}:{member}")
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError) as e:
        raise DataError(f"{archive}: not NLTK's treebank sample ({e})") from None


def wsj_trees(folder: Path, sections: range) -> Iterator[Tree]:
    """The cleaned trees of the LDC WSJ ``sections`` (folders 00-24 of ``wsj_SSNN.mrg`` files), in order."""
    if not folder.is_dir():
        raise DataError(f"data.dataset.wsj: not a folder: {folder}")
    for section in sections:
        path = folder / f"{section:02d}"
        files = sorted(p for p in path.glob("*") if p.suffix.lower() == ".mrg") if path.is_dir() else []
        if not files:
            raise DataError(f"data.dataset.wsj: {folder} has no section {section:02d} ({path}/*.mrg)")
        for file in files:
            try:
                text = file.read_text(encoding="utf-8", errors="strict")
            except (OSError, UnicodeDecodeError) as e:
                raise DataError(f"{file}: cannot read ({e})") from None
            yield from read_treebank(text, str(file))


def write_split(trees: list[Tree], files: tuple[Path, Path, Path], style: str, order: str = "top_down") -> None:
    """Write the words, the linearized trees and the gold trees, each file atomically, gold last."""
    source, target, gold = files
    atomic_write(source, "".join(" ".join(t.words()) + "\n" for t in trees).encode())
    atomic_write(target, "".join(linearize(t, style, order) + "\n" for t in trees)  # type: ignore[arg-type]
                 .encode())
    atomic_write(gold, "".join(f"{t}\n" for t in trees).encode())


def written_form(target: Path, source: Path | None = None) -> tuple[str, str] | None:
    """The (linearization, order) a written target file's first tree has (None: no tree): a tree written
    top-down begins with its root's bracket, in order with a leaf; style xx has no leaf but XX; style
    words has the ``source`` file's words as leaves (on each of its first lines). So a spec whose
    linearization or order changed rewrites the files at the same prefix (and the prepared training
    data, made from their size and time, is prepared again)."""
    tokens = next(iter_lines(target, "data.dataset"), "").split()
    if not tokens:
        return None
    leaves = [t for t in tokens if not t.startswith(("(", ")"))]
    style = "xx" if all(t == LEAF for t in leaves) else "words" if source and _lexical(target, source) else "tags"
    return style, "top_down" if tokens[0].startswith("(") else "in_order"


def _lexical(target: Path, source: Path, lines: int = 100) -> bool:
    """Whether the leaves of the target file's first ``lines`` trees are their source lines' words (a
    tagged tree whose every word is its own tag, as ``. .``, cannot fool 100 lines)."""
    pairs = islice(zip(iter_lines(target, "data.dataset"), iter_lines(source, "data.dataset"), strict=False), lines)
    return all([t for t in tree.split() if not t.startswith(("(", ")"))] == [leaf_text(w) for w in words.split()]
               for tree, words in pairs)
