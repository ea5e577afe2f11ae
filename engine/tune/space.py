"""A trial's point in the search space: each parameter asked of Optuna's trial (``suggest_*``), the
conditional ones only where their condition holds, the tied ones copied."""

from __future__ import annotations

from typing import Any, Protocol

from .spec import Param


class Suggests(Protocol):
    """What of ``optuna.Trial`` the space uses (a test may pass its own)."""

    def suggest_float(self, name: str, low: float, high: float, *, step: float | None = None,
                      log: bool = False) -> float: ...

    def suggest_int(self, name: str, low: int, high: int, *, step: int = 1, log: bool = False) -> int: ...

    def suggest_categorical(self, name: str, choices: Any) -> Any: ...


def suggest(space: dict[str, Param], trial: Suggests) -> dict[str, Any]:
    """The values of the trial, keyed by spec field: parameters in the order of the file, a conditional
    or tied one once the parameters it names have been decided (a parameter whose condition fails is
    left out: the base spec's value stays)."""
    values: dict[str, Any] = {}
    decided: set[str] = set()
    pending = list(space)
    while pending:
        ready = [k for k in pending if all(n in decided for n in _names(space[k]))]
        if not ready:  # load_study refuses cycles through same_as; a cycle through `when` ends here
            raise ValueError(f"space: the conditions of {', '.join(pending)} name each other in a cycle")
        for key in ready:
            pending.remove(key)
            decided.add(key)
            param = space[key]
            if all(values.get(name, _MISSING) in allowed for name, allowed in param.when.items()):
                values[key] = values[param.same_as] if param.same_as else _ask(trial, key, param)
    return values


_MISSING = object()  # a parameter left out by its own condition satisfies no condition on it


def _names(param: Param) -> list[str]:
    return ([param.same_as] if param.same_as else []) + list(param.when)


def _ask(trial: Suggests, key: str, param: Param) -> Any:
    if param.float is not None:
        return trial.suggest_float(key, *param.float, step=param.step, log=param.log)
    if param.int is not None:
        return trial.suggest_int(key, *param.int, step=int(param.step or 1), log=param.log)
    choices = param.choice or []
    # Optuna stores choices of None, bool, int, float and str; others (lists, mappings) go by their index
    if all(c is None or isinstance(c, bool | int | float | str) for c in choices):
        return trial.suggest_categorical(key, choices)
    return choices[trial.suggest_categorical(key, list(range(len(choices))))]


def base_values(space: dict[str, Param], spec: dict[str, Any]) -> dict[str, Any]:
    """The base spec's own value of each sampled parameter that the space admits (a conditional one only
    where its condition holds for those values): the baseline trial's point, as Optuna's params (a
    non-scalar choice by its index, as ``_ask`` asks for it)."""
    values: dict[str, Any] = {}
    for key, param in space.items():
        value = _at(spec, key)
        if param.same_as is not None or value is _MISSING or not param.admits(value):
            continue
        if any(values.get(name, _MISSING) not in allowed for name, allowed in param.when.items()):
            continue
        values[key] = value
    return {key: _param_value(space[key], value) for key, value in values.items()}


def _at(spec: dict[str, Any], key: str) -> Any:
    node: Any = spec
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _param_value(param: Param, value: Any) -> Any:
    choices = param.choice
    if choices is None or all(c is None or isinstance(c, bool | int | float | str) for c in choices):
        return value
    return choices.index(value)
