"""The tasks by name (``@register_task``, as fairseq's ``register_task``) and ``task_of``, the one place that
reads a spec's ``model.kind``, ``model.head`` kind and ``data.dataset`` kind to say which task a run is.

The built-in tasks' modules are imported on the first look-up (never at import), so that the trainer,
which asks a run's task, imports none of them; a task declared elsewhere (a plugin's, a test's) is
registered by importing its module."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from tbuild.builder.spec import Spec

    from .base import Task

T = TypeVar("T", bound="type[Task]")

BUILT_IN = ("translation", "language_model", "tagging", "classification", "masked_lm", "parsing.task",
            "embedding.task", "summarization.task")
DEFAULT = "translation"  # a run no task claims: source-target pairs
TASKS: dict[str, type[Task]] = {}
_loaded = False


def register_task(task: T) -> T:
    """Class decorator: add a task under its ``name``; a name taken is refused."""
    if not task.name or task.name in TASKS:
        raise ValueError(f"task {task.name!r} is {'already registered' if task.name else 'unnamed'}")
    TASKS[task.name] = task
    return task


def tasks() -> dict[str, type[Task]]:
    """Every registered task by name, the built-in ones imported first."""
    global _loaded
    if not _loaded:
        _loaded = True
        for name in BUILT_IN:
            import_module(f"{__package__}.{name}")
    return TASKS


def model_key(spec: Spec) -> str:
    """What a task's ``models`` name: ``prefix_lm`` for a decoder-only translator, else ``model.kind``."""
    return "prefix_lm" if spec.model.prefix_lm is not None else spec.model.kind


def task_of(spec: Spec) -> Task:
    """The run's task: the one claiming its ``model.head`` kind, else its ``data.dataset`` kind, else its
    model kind (each task's own claims, not those of the task it extends; the most recently registered
    first, so a task declared later can claim a built-in kind); translation where none does."""
    found = list(tasks().values())[::-1]
    head = spec.model.head.kind if spec.model.head is not None else None
    dataset = spec.data.dataset.kind if spec.data.dataset is not None else None
    for claims, key in (("heads", head), ("datasets", dataset), ("models", model_key(spec))):
        for task in found:
            if key is not None and key in vars(task).get(claims, ()):
                return task()
    return TASKS[DEFAULT]()
