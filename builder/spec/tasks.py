"""The tasks the spec knows, by their torch-free declarations: each task's name, the spec values that make a run
its own (its claims), the metrics that score it and its spec checks. ``task_name`` is the one place that says
which task a spec is: the one its ``task:`` names, else the one its claims give.

The built-in tasks declare themselves beside their engine modules (``engine/tasks/``) and, as third-party ones
do, arrive through the ``tbuild.tasks`` entry-point group (one line each in pyproject.toml)::

    [project.entry-points."tbuild.tasks"]
    summarization = "my_package.summarization.declaration:SUMMARIZATION"

loaded once, on the first look-up (never at import). A task declared in-process (a test's) calls ``declare``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Protocol

from .base import FieldError
from .data import DATASETS

if TYPE_CHECKING:
    from .data import DataSpec
    from .model import ModelSpec
    from .train import TrainSpec

GROUP = "tbuild.tasks"
DEFAULT = "translation"  # a run no task claims: source-target pairs
PACKAGE = "tbuild"  # the distribution whose tasks are built in: loaded before any other's


class Sections(Protocol):
    """What a task's spec checks read: the spec's sections (``Spec`` itself)."""

    task: str | None
    model: ModelSpec
    data: DataSpec
    train: TrainSpec


Check = Callable[[Sections], None]  # a spec check: raises FieldError naming the field at fault


@dataclass(frozen=True)
class TaskDeclaration:
    """A task as the spec knows it. ``heads``, ``datasets`` and ``models`` are its claims: ``model.head`` kinds,
    ``data.dataset`` kinds and model kinds (``prefix_lm``: a decoder-only translator) that make a run its own;
    ``metrics`` the validation metrics that can select its checkpoints (``train.select.metric``), each with
    whether higher is better; ``select`` the one a spec selects on by default (SelectSpec's default);
    ``module`` the engine module that holds its ``Task`` (imported when a run of it is trained, evaluated or
    served); ``checks`` its spec checks, in order. A metric it does not offer is refused with what the task
    offering it says the metric needs (``needs``: "f1 (EVALB) scores parse trees ..."), else with
    ``other_metric`` (``{metric}``, ``{task}`` and ``{metrics}`` filled in)."""

    name: str
    module: str
    heads: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    metrics: dict[str, bool] = field(default_factory=lambda: {"ppl": False})
    select: str = "ppl"
    checks: tuple[Check, ...] = ()
    needs: dict[str, str] = field(default_factory=dict)
    other_metric: str = "{metric} is not a metric of the {task} task: choose one of {metrics}"

    def check(self, spec: Sections) -> None:
        """Refuse, with a ``FieldError`` naming the field at fault, a spec this task cannot run (its checks, in
        order)."""
        for check in self.checks:
            check(spec)

    def check_metric(self, spec: Sections) -> None:
        """Refuse a ``train.select.metric`` that is not one of the task's."""
        metric = spec.train.select.metric
        if metric not in self.metrics:
            raise FieldError(("train", "select", "metric"), self.refusal(metric))

    def refusal(self, metric: str) -> str:
        """Why this task refuses ``metric``: what the metric needs, as the task offering it says, else what this
        task's runs are selected on."""
        offered = (d.needs[metric] for d in declarations().values() if metric in d.needs)
        return next(offered, None) or self.other_metric.format(metric=metric, task=self.name,
                                                                  metrics=", ".join(self.metrics))


_DECLARED: dict[str, TaskDeclaration] = {}
_loaded = False


def declare(declaration: TaskDeclaration) -> TaskDeclaration:
    """Add a task's declaration; a name taken is refused."""
    if not declaration.name or declaration.name in _DECLARED:
        raise ValueError(f"task {declaration.name!r} is {'already declared' if declaration.name else 'unnamed'}")
    _DECLARED[declaration.name] = declaration
    return declaration


def undeclare(name: str) -> None:
    """Remove a task declared in-process (a test's, when it ends)."""
    _DECLARED.pop(name, None)


def declarations() -> dict[str, TaskDeclaration]:
    """Every declared task by name, in the order declared: the entry points' (tbuild's own first), loaded on the
    first call, then those declared in-process."""
    global _loaded
    if not _loaded:
        _loaded = True
        found = sorted(entry_points(group=GROUP), key=lambda ep: getattr(ep.dist, "name", "") != PACKAGE)
        for ep in found:
            declaration = ep.load()
            if not isinstance(declaration, TaskDeclaration) or declaration.name != ep.name:
                raise TypeError(f"entry point {ep.name} = {ep.value} ({GROUP}) is not the TaskDeclaration "
                                f"of a task named {ep.name}")
            declare(declaration)
    return _DECLARED


def metric_fits_the_task(spec: Sections) -> None:
    """A check of every task's (in its ``checks``, where it comes in order): ``train.select.metric`` is one of
    the task's metrics."""
    declarations()[task_name(spec)].check_metric(spec)


def claim_keys(spec: Sections) -> tuple[tuple[str, str | None], ...]:
    """What a spec offers the tasks' claims, in the order they are tried: its head kind, its data set's kind,
    its model kind (``prefix_lm`` for a decoder-only translator)."""
    head = spec.model.head.kind if spec.model.head is not None else None
    dataset = spec.data.dataset.kind if spec.data.dataset is not None else None
    model = "prefix_lm" if spec.model.prefix_lm is not None else spec.model.kind
    return (("heads", head), ("datasets", dataset), ("models", model))


def claimant(claims: str, key: str | None) -> TaskDeclaration | None:
    """The task claiming ``key`` among its ``claims`` (heads, datasets, models): the most recently declared first,
    so a task declared later can claim a built-in kind."""
    found = (d for d in reversed(declarations().values()) if key is not None and key in getattr(d, claims))
    return next(found, None)


def claims_fit_the_task(spec: Sections) -> None:
    """A spec naming its task may not hold a head or data set that makes it another task (``task: translation``
    over a tagging data set); a model kind is shared (a summarizer is an encoder-decoder): only a head's or a data
    set's claim counts, the head's first, as without ``task:``."""
    fields = {"heads": "model.head kind", "datasets": "data.dataset kind"}
    claimed = ((claims, key, claimant(claims, key)) for claims, key in claim_keys(spec)[:2])
    claims, key, other = next(((c, k, d) for c, k, d in claimed if d is not None), ("", None, None))
    if spec.task is not None and other is not None and other.name != spec.task:
        raise FieldError(("task",), f"{spec.task} does not fit {fields[claims]} {key!r}, which makes the run the "
                                    f"{other.name} task: name task {other.name}, or leave task out")


def task_name(spec: Sections) -> str:
    """The spec's task: the one ``task:`` names, else the one claiming its ``model.head`` kind, else its
    ``data.dataset`` kind, else its model kind (the most recently declared first, so a task declared later can
    claim a built-in kind); translation where none does."""
    if spec.task is not None:
        return spec.task
    found = (claimant(claims, key) for claims, key in claim_keys(spec))
    return next((declaration.name for declaration in found if declaration is not None), DEFAULT)


DATASETS.before = declarations  # a task's folder may declare its own data set (summarization's scitldr)
