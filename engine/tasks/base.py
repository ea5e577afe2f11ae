"""What a task is (as fairseq's ``FairseqTask``): the one object that knows what varies between translation,
language modelling, tagging, sequence classification, the masked LM and parsing. The trainer, ``tbuild
evaluate``, ``decode``, ``serve``, ``tune`` and ``export`` ask the run's task (``registry.task_of``) and never
test which one it is.

A task says how the vocabulary's labels are fitted and the training and validation data are read, what a
label row adds to each class, a training batch's loss and the validation loss pass (``loss``, ``valid_loss``: the
label-smoothed NLL of ``engine/loss.py`` unless a task overrides them), how validation decodes and scores
(``valid_scorer``, ``valid_score``) and which way its metrics are better, how a split is evaluated
and reported, how input lines are decoded, which endpoint serves it, the study's score and the export it
takes. Every method a task does not take refuses the command in one line (``refuse``).

This module imports nothing heavy: the trainer imports it, and a task's own module (with what it needs:
decoding, parsing, serving) is imported when a spec resolves to it."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ..errors import TbuildError

if TYPE_CHECKING:
    import torch
    from torch import nn

    from tbuild.builder.spec import Spec

    from ..data.batches import BatchSource
    from ..data.tokenizer import Tokenizer
    from ..decoding.engines import Engine
    from ..device.policy import Policy
    from ..run.card import TaskCard
    from ..run.directory import EvalRecord, Run, RunDir
    from ..serving.endpoints import Endpoint
    from ..significance import Measure

Log = Callable[[str], None]


@dataclass
class Table:
    """A table of a report: its title, column names, rows of text, and which columns are right-aligned
    (by index)."""

    title: str
    columns: tuple[str, ...]
    rows: list[tuple[str, ...]] = field(default_factory=list)
    right: tuple[int, ...] = (1,)

    def add(self, *cells: str) -> None:
        self.rows.append(cells)


def scores_table(title: str) -> Table:
    """An empty metric / score / note table, the one most evaluations print."""
    return Table(title, ("metric", "score", "note"))


Report = list[Table | str]  # what ``evaluate`` prints, in order: tables and lines (rich markup)


@dataclass(frozen=True)
class Loading:
    """Which weights, on which device, through which engine (``--checkpoint``, ``--average``, ...), and how
    several runs' models combine (``--weights``, ``--combine``: ``decoding/ensemble.py``)."""

    checkpoint: Path | None = None
    average: int | None = None
    device: str = "auto"
    compiled: bool = False
    engine: str = "native"
    quantization: str | None = None
    member_weights: list[float] | None = None
    combine: str = "logprob"


@dataclass(frozen=True)
class EvalCall:
    """What ``tbuild evaluate`` asks: the split (or ``src``/``ref`` files), how much to show, the loading,
    the command line's decoder (``load_decoder``: an engine for the runs, an ensemble of several), and a
    parsing run's ``params`` (EVALB file) and ``diagnose``."""

    split: str = "test"
    src: Path | None = None
    ref: Path | None = None
    lowercase: bool = False
    show: int = 3
    loading: Loading = Loading()
    load_decoder: Callable[[], Engine] | None = None
    notify: Log = lambda _: None
    params: Path | None = None
    diagnose: bool = False


@dataclass(frozen=True)
class DecodeCall:
    """What ``tbuild decode`` asks: the input (``read``: its bytes, read when the task takes the runs) and
    its name (a file or stdin), side files of target prefixes and constraints, the output format, the
    loading and decoder (as ``EvalCall``), and how to show progress (``progress(total)``: a context giving
    ``advance(n)``) and warn about an input line."""

    read: Callable[[], bytes]
    name: str
    prefix_file: Path | None = None
    constraints_file: Path | None = None
    format: str = "text"
    align: bool = False
    loading: Loading = Loading()
    load_decoder: Callable[[], Engine] | None = None
    notify: Log = lambda _: None
    warn: Log = lambda _: None
    progress: Callable[[int], AbstractContextManager[Callable[[int], None]]] | None = None


@dataclass(frozen=True)
class DecodeTiming:
    """What a study's decode-time objective asks of a trial's run (``Task.decode_time``): its validation
    split's first ``lines`` sources (None: all), decoded ``repeats`` times with its best or ``average``d
    weights, ``after_batch`` between batches as `tbuild decode` calls it."""

    lines: int | None = None
    repeats: int = 3
    average: bool = False
    after_batch: Callable[[], None] = lambda: None


@dataclass(frozen=True)
class DecodeTime:
    """A run's decoding timed (``Task.decode_time``): each repeat's wall seconds, their median, and how
    it decoded (the spec's decode settings, the engine's precision, the CPU threads)."""

    lines: int
    repeats: list[float]
    beam: int
    alpha: float
    batch_tokens: int
    precision: str
    threads: int
    engine: str = "native"

    @property
    def seconds(self) -> float:
        """The median of the repeats."""
        return statistics.median(self.repeats)

    @property
    def sentences_per_second(self) -> float:
        return self.lines / max(self.seconds, 1e-9)

    def to_json(self) -> dict[str, Any]:
        return {"lines": self.lines, "seconds": self.seconds, "sentences_per_second": self.sentences_per_second,
                "repeats": self.repeats, "beam": self.beam, "alpha": self.alpha, "batch_tokens": self.batch_tokens,
                "precision": self.precision, "threads": self.threads, "engine": self.engine}


class Scorer(Protocol):
    """What validation decodes and scores (``Task.valid_scorer``): its source lines, a share of them decoded with
    the model being trained, and the metric of all of them (``tasks/validation.py``: ``ValidScorer``). The
    trainer spreads the lines over its processes and gathers the outputs."""

    sources: list[str]

    def decode(self, model: nn.Module, indices: list[int]) -> list[str]: ...

    def score(self, outputs: list[str]) -> float: ...


def quiet_progress(total: int) -> AbstractContextManager[Callable[[int], None]]:
    """A progress display that shows nothing."""
    from contextlib import nullcontext

    return nullcontext(lambda n: None)


class Task:
    """Base of the tasks. A subclass names itself (``name``: the name of its declaration, which says what
    makes a run its own: ``builder/spec/tasks.py``) and overrides what it takes; the rest refuses in one line."""

    name: ClassVar[str] = ""
    what: ClassVar[str] = "a run"  # the task in words, for refusals: "a tagger"
    unit: ClassVar[str] = "pairs"  # what a training example is called
    bos_first: ClassVar[bool] = False  # whether the model's input rows start with BOS (an export says so)
    peft_type: ClassVar[str | None] = None  # peft's task_type for its adapters (adapter_config.json)
    commands: ClassVar[tuple[str, ...]] = ()  # the commands on a trained run it takes (``check``)
    times_decoding: ClassVar[bool] = False  # whether a study can time its decoding (``decode_time``)
    outputs: ClassVar[str] = "out"  # eval_SPLIT.<outputs>: the outputs an evaluation keeps, one line a sentence

    def refuse(self, command: str, spec: Spec) -> TbuildError:
        """The one-line refusal of ``command`` on a run of this task."""
        return TbuildError(f"tbuild {command} of {self.what} is not supported ({spec.name or 'this run'} is "
                           f"{self.what})")

    def check(self, command: str, spec: Spec) -> None:
        """Refuse ``command`` (``attention``, ``card``, ``generate``, ...) in one line unless the task takes it."""
        if command not in self.commands:
            raise self.refuse(command, spec)

    # training ---------------------------------------------------------------------------------------------
    def fit_labels(self, spec: Spec, log: Log) -> Spec:
        """The spec with what the training split decides filled in (a tagger's labels); unchanged here."""
        return spec

    def training_data(self, spec: Spec, tokenizer: Tokenizer, run: RunDir, log: Log
                      ) -> tuple[BatchSource, BatchSource | None]:
        """The training examples and the validation ones (None without ``data.valid``)."""
        raise self.refuse("train", spec)

    def prepare(self, spec: Spec, run: RunDir, log: Log, workers: int | None = None) -> Any:
        """``tbuild data prepare``: the run's tokenizer trained if needed, then the training split encoded,
        filtered and memory-mapped (``MappedPairs``)."""
        raise self.refuse("data prepare", spec)

    def label_offset(self, spec: Spec) -> int:
        """What a target row adds to each class: 0 for tokens (a task of labels stores them above PAD)."""
        return 0

    def loss(self, model: nn.Module, batch: Sequence[torch.Tensor], spec: Spec, policy: Policy,
             precision: AbstractContextManager | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """A training batch's loss sum and NLL sum (0-d tensors on the device, the loss differentiable; the trainer
        normalises by the update's target tokens). ``batch``: src, tgt_in, tgt_out and the padding mask or
        segment ids, as the task's data collate; ``precision``: an autocast other than the policy's. Here the
        label-smoothed NLL (§5.4) of the model's logits for tgt_out, with ``train.rdrop``'s consistency term
        (``engine/loss.py``: ``batch_loss``)."""
        from ..loss import batch_loss

        train = spec.train
        return batch_loss(model, batch, label_smoothing=train.label_smoothing, rdrop=train.rdrop, policy=policy,
                          offset=self.label_offset(spec), precision=precision)

    def valid_loss(self, model: nn.Module, pairs: BatchSource, spec: Spec, policy: Policy) -> dict[str, float]:
        """The validation loss pass over ``pairs`` (teacher-forced, in eval mode; the caller puts the model back
        into training mode): its figures per target token, written to valid.jsonl (``loss``; ``nll`` and
        ``ppl`` where the loss is a likelihood; a task of labels' ``accuracy``; ``tokens``)."""
        from ..loss import evaluate_loss

        return evaluate_loss(model, pairs, batch_tokens=spec.train.batch_tokens,
                             label_smoothing=spec.train.label_smoothing, policy=policy, special=spec.special(),
                             offset=self.label_offset(spec))

    def valid_scorer(self, spec: Spec, tokenizer: Tokenizer, policy: Policy) -> Scorer | None:
        """What validation decodes and scores for ``train.select.metric`` (None: the loss pass scores)."""
        return None

    def valid_score(self, spec: Spec, figures: dict[str, float]) -> float:
        """The score of ``train.select.metric`` that the loss pass's ``figures`` give where validation decodes
        nothing (``valid_scorer`` is None): the figure of that name (perplexity, a tagger's accuracy)."""
        metric = spec.train.select.metric
        if metric not in figures:
            raise TbuildError(f"train.select.metric {metric} is not scored by {self.what}'s validation (it gives "
                              f"{', '.join(sorted(figures))})")
        return figures[metric]

    # evaluation and decoding ------------------------------------------------------------------------------
    def evaluate(self, runs: list[Run], call: EvalCall) -> Report:
        """Score ``runs`` (one, or an ensemble) on a split, write ``eval_SPLIT.json`` and say what was found."""
        raise self.refuse("evaluate", runs[0].spec)

    def measures(self, run: Run, call: EvalCall) -> list[Measure]:
        """The metrics of ``call``'s split (or ``--ref``) as statistics per sentence of the outputs an
        evaluation keeps (``keep_outputs``), for paired bootstrap (``engine/significance.py``); the headline
        first."""
        raise self.refuse("evaluate --against", run.spec)

    def keep_outputs(self, run: Run, split: str, lines: list[str]) -> Path:
        """Keep an evaluation's outputs, one line per sentence (a line break inside one made a space), beside its
        record (``eval_SPLIT.<outputs>``): what ``tbuild evaluate --against``, a sweep's table and a study's
        report compare."""
        from ..files import atomic_write

        path = run.dir.outputs_file(split, self.outputs)
        atomic_write(path, "".join(" ".join(line.splitlines()) + "\n" for line in lines).encode())
        return path

    def kept_outputs(self, run: Run, split: str) -> list[str] | None:
        """The outputs an evaluation of ``split`` kept (None where there are none)."""
        path = run.dir.outputs_file(split, self.outputs)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        return text.split("\n")[:-1]

    def decode(self, runs: list[Run], call: DecodeCall) -> list[str]:
        """The output lines of the input's lines."""
        raise self.refuse("decode", runs[0].spec)

    def study_record(self, run: Run, average: bool) -> EvalRecord:
        """A finished trial's validation record, as ``tbuild evaluate --split valid`` scores it
        (``average``: the averaged weights, else the best); its outputs kept (``keep_outputs``)."""
        raise self.refuse("tune", run.spec)

    def decode_time(self, run: Run, timing: DecodeTiming) -> DecodeTime:
        """The run's validation sources decoded as `tbuild decode` decodes them, timed (a study's decode-time
        objective; ``times_decoding`` says whether the task takes it)."""
        raise self.refuse("tune (a decode-time objective)", run.spec)

    def serve(self, run: Run, batch_tokens: int, loading: Loading, notify: Log) -> Endpoint:
        """The run's endpoint, its model loaded as ``loading`` says."""
        raise self.refuse("serve", run.spec)

    def card(self, run: Run) -> TaskCard:
        """What the run's model card says of its task (``run/card.py``: its pipeline tag, results section)."""
        raise self.refuse("card", run.spec)

    def export(self, run: Run) -> str:
        """How the run is exported: ``translator`` (``--to ctranslate2``/``hf``, checked on a split or on
        files) or ``graph`` (a language model's or encoder's own classes, checked on the valid split by
        ``graph_parity``)."""
        raise self.refuse("export", run.spec)

    def starts_with_bos(self, spec: Spec) -> bool:
        """Whether the model's input rows start with BOS (a ``graph`` export's tokenizer says so)."""
        return self.bos_first

    def graph_parity(self, run: Run, to: str, out: Path, loading: Loading, notify: Log) -> Any:
        """A ``graph`` export in ``out`` compared with tbuild on the valid split (``GraphParity``)."""
        raise self.refuse("export", run.spec)
