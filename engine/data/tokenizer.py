"""The run's tokenizer: a shared source+target sentencepiece model (§5.1) with the ids of
builder/tokens.py, trained on a seeded sample of the training pairs or loaded (or an imported model's
Hugging Face tokenizers file, ``tokenizers_file.py``), and the spec's vocabulary sizes fitted to it."""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterable
from pathlib import Path

import sentencepiece as spm

from tbuild.builder.spec import Spec, TokenizerSpec
from tbuild.builder.tokens import BOS, EOS, PAD, UNK

from ..errors import DataError
from ..run.directory import RunDir
from . import tokenizers_file
from .corpus import iter_split, layout_of, split_paths
from .datasets import ensure_data, provider_of
from .pointer import fit_pointer

Log = Callable[[str], None]

_SPECIAL = {"pad": PAD, "unk": UNK, "bos": BOS, "eos": EOS}
_SKIP_ON_DECODE = frozenset({PAD, BOS, EOS})


class Tokenizer:
    """Subword ids in, text out. Build with ``Tokenizer.train`` or ``Tokenizer.load``."""

    def __init__(self, processor: spm.SentencePieceProcessor, path: Path) -> None:
        self.sp = processor
        self.path = path

    @property
    def vocab_size(self) -> int:
        return int(self.sp.get_piece_size())

    @classmethod
    def train(
        cls, sentences: Iterable[str], spec: TokenizerSpec, model_prefix: Path, seed: int = 1,
        whole: Iterable[str] = (), controls: Iterable[str] = (),
    ) -> Tokenizer:
        """Train on the non-empty ``sentences``; write ``<model_prefix>.model`` and ``.vocab``.
        ``whole``: tokens that are each one piece wherever they start a word, never split. ``controls``:
        control pieces (ids after EOS, in order) that no text encodes to, e.g. a masked LM's [MASK].
        Deterministic for the same input and seed."""
        lines = [s for s in sentences if s]
        if not lines:
            raise DataError("cannot train a tokenizer: no non-empty training sentences")
        model_prefix.parent.mkdir(parents=True, exist_ok=True)
        spm.set_random_generator_seed(seed)
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(lines),
                model_prefix=str(model_prefix),
                model_type=spec.kind,
                vocab_size=spec.vocab_size,
                character_coverage=spec.character_coverage,
                **{f"{name}_id": value for name, value in _SPECIAL.items()},
                num_threads=max(1, min(os.cpu_count() or 1, 16)),
                minloglevel=2,
                # "▁(NP" is one piece: the bracket with the word boundary before it, so a linearized
                # tree costs one piece per token
                **({"user_defined_symbols": [f"▁{t}" for t in sorted(set(whole))]} if whole else {}),
                **({"control_symbols": list(controls)} if controls else {}),
            )
        except RuntimeError as e:
            reason = str(e).split("] ", 1)[-1].strip() or str(e)
            raise DataError(
                f"data.tokenizer: sentencepiece training failed on {len(lines)} sentences: {reason}"
            ) from None
        return cls.load(Path(f"{model_prefix}.model"))

    @classmethod
    def load(cls, path: Path) -> Tokenizer:
        """Load a sentencepiece ``.model`` file, or a Hugging Face tokenizers ``.json`` file
        (``tokenizers_file.py``); it must use pad=0, unk=1, bos=2, eos=3."""
        if not path.is_file():
            raise DataError(f"tokenizer model not found: {path}")
        if path.suffix == tokenizers_file.SUFFIX:
            processor = tokenizers_file.TokenizersProcessor(path)
        else:
            try:
                processor = spm.SentencePieceProcessor(model_file=str(path))
            except (RuntimeError, OSError) as e:
                raise DataError(f"{path}: not a valid sentencepiece model ({str(e).strip()})") from None
        actual = {"pad": processor.pad_id(), "unk": processor.unk_id(),
                  "bos": processor.bos_id(), "eos": processor.eos_id()}
        if actual != _SPECIAL:
            got = ", ".join(f"{k}={v}" for k, v in actual.items())
            want = " ".join(f"--{k}_id={v}" for k, v in _SPECIAL.items())
            if path.suffix == tokenizers_file.SUFFIX:
                raise DataError(f"{path}: ids 0 to 3 are not all special tokens ({got}, -1: not special); tbuild "
                                "needs PAD 0, UNK 1, BOS 2, EOS 3")
            raise DataError(f"{path}: special ids are {got}; tbuild needs a model trained with {want}")
        return cls(processor, path)  # type: ignore[arg-type] # a TokenizersProcessor answers the same calls

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Subword ids per text, without BOS/EOS."""
        return self.sp.encode(list(texts), out_type=int)

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids``; PAD, BOS and EOS are skipped wherever they occur."""
        return self.sp.decode([int(i) for i in ids if int(i) not in _SKIP_ON_DECODE])

    def decode_batch(self, batch: list[list[int]]) -> list[str]:
        return [self.decode(ids) for ids in batch]

    def __repr__(self) -> str:
        return f"Tokenizer({self.path}, vocab_size={self.vocab_size})"


def prepare_tokenizer(spec: Spec, run: RunDir, log: Log) -> Tokenizer:
    """data.tokenizer.model if set, else the run's spm.model, else train one on the training split."""
    tspec = spec.data.tokenizer
    if tspec.model is not None:
        tok = Tokenizer.load(Path(tspec.model))
        log(f"tokenizer: {tok.path} ({tok.vocab_size} pieces)")
        return tok
    if run.tokenizer.is_file():
        tok = Tokenizer.load(run.tokenizer)
        log(f"tokenizer: {run.tokenizer} ({tok.vocab_size} pieces, from an earlier run)")
        return tok
    ensure_data(spec.data, log, splits=("train",))
    pairs = iter_split(spec.data, "train")
    if tspec.max_sentences is not None:  # per side: sample pairs, so both languages stay balanced
        pairs = iter(sample_pairs(pairs, tspec.max_sentences, seed=spec.train.seed))
    kept = list(pairs)
    if not kept:
        raise DataError(f"data.train: no lines in {' and '.join(map(str, split_paths(spec.data, 'train')))}")
    sides = layout_of(spec.data).text  # one side: a language model's text, a tagger's words, a classifier's text
    text = len(sides) == 1
    source, target = [] if text else [s for s, _ in kept], [pair[sides[-1]] for pair in kept]
    del kept
    whole = whole_target_tokens(spec, target)
    counts = f"{len(target)}" if text else f"{len(source)} + {len(target)}"
    log(f"tokenizer: training a{'' if text else ' shared'} {tspec.kind} model, vocab {tspec.vocab_size}, "
        f"on {counts} sentences -> {run.tokenizer}"
        + (f"; {len(whole)} target tokens kept whole" if whole else ""))
    run.path.mkdir(parents=True, exist_ok=True)
    tmp_prefix = run.path / f".spm.{os.getpid()}"
    controls = list(getattr(spec.model.head, "controls", ()))  # pieces a head reserves (a masked LM's [MASK])
    Tokenizer.train(source + target, tspec, tmp_prefix, seed=spec.train.seed, whole=whole, controls=controls)
    for ext in (".vocab", ".model"):  # .model last: its presence means the pair is complete
        os.replace(f"{tmp_prefix}{ext}", run.tokenizer.with_suffix(ext))
    return Tokenizer.load(run.tokenizer)


def whole_target_tokens(spec: Spec, target: list[str]) -> list[str]:
    """The target tokens made whole pieces (``data.tokenizer.target_tokens``): every distinct one of the
    training targets for ``whole``, none for ``subwords``, and for ``auto`` those the data set's provider
    names (the treebank's: its trees' tokens, ``treebank.py``; the others': none)."""
    mode = spec.data.tokenizer.target_tokens
    if mode == "auto":
        return provider_of(spec.data).whole_targets(target)
    return sorted({tok for line in target for tok in line.split()}) if mode == "whole" else []


def sample_pairs(pairs: Iterable[tuple[str, str]], k: int, *, seed: int) -> list[tuple[str, str]]:
    """A uniform random sample of ``k`` pairs (all if fewer), in corpus order, streamed: reservoir
    sampling (Vitter's algorithm R) holds only the sample, whatever the corpus size. Seeded."""
    rng = random.Random(f"tbuild-tokenizer-sample:{seed}")
    reservoir: list[tuple[int, tuple[str, str]]] = []
    for i, pair in enumerate(pairs):
        if i < k:
            reservoir.append((i, pair))
        else:
            j = rng.randrange(i + 1)
            if j < k:
                reservoir[j] = (i, pair)
    return [pair for _, pair in sorted(reservoir, key=lambda item: item[0])]


def fit_vocab(spec: Spec, tok: Tokenizer, log: Log) -> Spec:
    """The spec with its vocabulary resolved against the tokenizer: ``from_tokenizer`` becomes the
    tokenizer's piece count; an explicit size needs a row for every piece (more rows are allowed). A
    decoder pointer's id sets are resolved too (``pointer.py``)."""
    return fit_pointer(_fit_sizes(spec, tok, log), tok)


def _fit_sizes(spec: Spec, tok: Tokenizer, log: Log) -> Spec:
    for name in ("vocab_size", "src_vocab_size"):
        size = getattr(spec.model, name)
        if isinstance(size, int) and size < tok.vocab_size:
            raise DataError(f"model.{name} ({size}) is smaller than the tokenizer's {tok.vocab_size} pieces "
                            f"({tok.path}); set it to {tok.vocab_size} or use vocab_size: from_tokenizer")
    if spec.model.vocab_size != "from_tokenizer":
        return spec
    if tok.vocab_size != spec.data.tokenizer.vocab_size:
        log(f"tokenizer: {tok.path} has {tok.vocab_size} pieces, not data.tokenizer.vocab_size "
            f"{spec.data.tokenizer.vocab_size}; the model follows the tokenizer")
    return spec.model_copy(update={"model": spec.model.model_copy(update={"vocab_size": tok.vocab_size})})
