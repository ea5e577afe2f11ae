"""The run's tokenizer: a shared source+target sentencepiece model (§5.1), trained with tbuild's own special ids
(``DEFAULT``, components/specs/special.py) on a seeded sample of the training pairs or loaded (or an imported
model's Hugging Face tokenizers file, ``tokenizers_file.py``), the special ids it reports (``Tokenizer.special``),
and the spec fitted to it (its vocabulary sizes, and its special ids where they are not tbuild's own)."""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterable
from pathlib import Path

import sentencepiece as spm

from tbuild.builder.spec import Spec, TokenizerSpec
from tbuild.components.specs.special import DEFAULT, ROLES, Specials

from ..errors import DataError
from ..run.directory import RunDir
from . import tokenizers_file
from .corpus import iter_split, layout_of, split_paths
from .datasets import ensure_data, provider_of
from .pointer import fit_pointer

Log = Callable[[str], None]



class Tokenizer:
    """Subword ids in, text out, and the vocabulary's special ids (``special``). Build with ``Tokenizer.train``
    or ``Tokenizer.load``."""

    def __init__(self, processor: spm.SentencePieceProcessor, path: Path, special: Specials = DEFAULT) -> None:
        self.sp = processor
        self.path = path
        self.special = special

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
                **{f"{name}_id": getattr(DEFAULT, name) for name in ROLES},  # tbuild's own ids
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
    def load(cls, path: Path, special: Specials | None = None) -> Tokenizer:
        """Load a sentencepiece ``.model`` file, or a Hugging Face tokenizers ``.json`` file
        (``tokenizers_file.py``), with its special ids: ``special`` (a run's record) where given, which must
        name the model's own roles (a sentencepiece model's pad, unk, bos and eos ids; a tokenizers file's
        special tokens), else the model's own (a tokenizers file: tbuild's, its ids 0 to 3 special)."""
        if not path.is_file():
            raise DataError(f"tokenizer model not found: {path}")
        if path.suffix == tokenizers_file.SUFFIX:
            processor = tokenizers_file.TokenizersProcessor(path)
            found = tokenizers_file.check_special(processor, path, special or DEFAULT)
        else:
            try:
                processor = spm.SentencePieceProcessor(model_file=str(path))
            except (RuntimeError, OSError) as e:
                raise DataError(f"{path}: not a valid sentencepiece model ({str(e).strip()})") from None
            found = _spm_special(processor, path, special)
        return cls(processor, path, found)  # type: ignore[arg-type] # a TokenizersProcessor answers the same calls

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Subword ids per text, without BOS/EOS."""
        return self.sp.encode(list(texts), out_type=int)

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids``; the special ids text leaves out (pad, bos, eos, a decoder's start:
        ``Specials.skipped``) are skipped wherever they occur, and so are rows past the tokenizer's pieces (a
        model's table may be larger: T5's 32128 rows over 32000 pieces)."""
        skipped, size = self.special.skipped, self.vocab_size
        return self.sp.decode([int(i) for i in ids if int(i) not in skipped and int(i) < size])

    def decode_batch(self, batch: list[list[int]]) -> list[str]:
        return [self.decode(ids) for ids in batch]

    def __repr__(self) -> str:
        return f"Tokenizer({self.path}, vocab_size={self.vocab_size})"


def _spm_special(processor: spm.SentencePieceProcessor, path: Path, special: Specials | None) -> Specials:
    """A sentencepiece model's special ids: its own pad, unk, bos and eos ids (-1: none), with ``special``'s
    adding where given (whose ids must be the model's)."""
    own = {role: i if i >= 0 else None for role, i in zip(ROLES, (processor.pad_id(), processor.unk_id(),
                                                                  processor.bos_id(), processor.eos_id()), strict=True)}
    given = special or DEFAULT
    if special is not None and own != {role: getattr(given, role) for role in ROLES}:
        got = ", ".join(f"{role} {i}" for role, i in own.items())
        raise DataError(f"{path}: its special ids are {got}, not those of the run's data.tokenizer.special")
    try:
        return Specials(**own, source=given.source, target=given.target)
    except ValueError:  # tbuild's adding names a role the model lacks: the model's own roles, nothing added, a
        # decoder starting from the first of bos, pad and eos the model has (T5's spiece.model has no bos)
        start = next((r for r in ("bos", "pad", "eos") if own[r] is not None), "eos")
        return Specials(**own, source=("text",), target=(start, "text", "eos"))


def run_tokenizer(path: Path, spec: Spec) -> Tokenizer:
    """A run's tokenizer at ``path``, with the special ids its (fitted) spec records."""
    return Tokenizer.load(path, spec.data.tokenizer.special)


def prepare_tokenizer(spec: Spec, run: RunDir, log: Log) -> Tokenizer:
    """data.tokenizer.model if set, else the run's spm.model, else train one on the training split."""
    tspec = spec.data.tokenizer
    if tspec.model is not None:
        tok = run_tokenizer(Path(tspec.model), spec)
        log(f"tokenizer: {tok.path} ({tok.vocab_size} pieces)")
        return tok
    if run.tokenizer.is_file():
        tok = run_tokenizer(run.tokenizer, spec)
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
    controls = list(spec.model.output_head.controls)  # pieces a head reserves (a masked LM's [MASK])
    Tokenizer.train(source + target, tspec, tmp_prefix, seed=spec.train.seed, whole=whole, controls=controls)
    for ext in (".vocab", ".model"):  # .model last: its presence means the pair is complete
        os.replace(f"{tmp_prefix}{ext}", run.tokenizer.with_suffix(ext))
    return run_tokenizer(run.tokenizer, spec)


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
    tokenizer's piece count; an explicit size needs a row for every piece (more rows are allowed); the
    tokenizer's special ids are recorded (``data.tokenizer.special``) where they are not tbuild's own. A
    decoder pointer's id sets are resolved too (``pointer.py``)."""
    return fit_pointer(_fit_special(_fit_sizes(spec, tok, log), tok), tok)


def _fit_special(spec: Spec, tok: Tokenizer) -> Spec:
    """The spec recording ``tok``'s special ids (none where they are tbuild's own, as before the record)."""
    outside = next((i for i in sorted(tok.special.special) if i >= tok.vocab_size), None)
    if outside is not None:
        raise DataError(f"{tok.path}: special id {outside} is not one of its {tok.vocab_size} pieces")
    return recorded(spec, tok.special)


def recorded(spec: Spec, special: Specials | None) -> Spec:
    """The spec with ``special`` as its data.tokenizer.special (None where it is tbuild's own)."""
    special = None if special is None or special.is_default else special
    if special == spec.data.tokenizer.special:
        return spec
    tokenizer = spec.data.tokenizer.model_copy(update={"special": special})
    return spec.model_copy(update={"data": spec.data.model_copy(update={"tokenizer": tokenizer})})


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
