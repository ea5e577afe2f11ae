"""The tasks by name (``@register_task``, as fairseq's ``register_task``) and ``task_of``, the run's task.

Which task a spec is, the builder says (``Spec.task_name``: its ``task:``, else its claims, from the tasks'
torch-free declarations, ``builder/spec/tasks.py``); a ``Task`` class binds to its declaration by name. A task's
module is imported when a run of it is asked for (its declaration's ``module``: never at import), so that the
trainer, which asks a run's task, imports no other."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from tbuild.builder.spec import Spec

    from .base import Task

T = TypeVar("T", bound="type[Task]")

TASKS: dict[str, type[Task]] = {}


def register_task(task: T) -> T:
    """Class decorator: add a task under its ``name``; a name taken is refused."""
    if not task.name or task.name in TASKS:
        raise ValueError(f"task {task.name!r} is {'already registered' if task.name else 'unnamed'}")
    TASKS[task.name] = task
    return task


def task_named(name: str) -> type[Task]:
    """The ``Task`` class of a declared task, its module (the declaration's ``module``) imported if need be."""
    from tbuild.builder.spec.tasks import declarations

    if name not in TASKS:
        import_module(declarations()[name].module)
    return TASKS[name]


def task_of(spec: Spec) -> Task:
    """The run's task: the one its spec names (``task:``), else the one its claims give (``Spec.task_name``)."""
    return task_named(spec.task_name())()
