"""Overlays: files that name a base spec and add to it (a sweep, a study), read and validated by their own
model with the same file:line errors as specs, and their base found relative to them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from .loader import SpecError, Where, did_you_mean, read_yaml

M = TypeVar("M", bound=BaseModel)
ModelAt = Callable[[tuple], type[BaseModel]]  # the model that holds the key at loc + (key,)


def load_overlay(path: Path, model: type[M], noun: str, keys: str, model_at: ModelAt) -> tuple[M, dict, Path]:
    """The file at ``path`` validated by ``model``, its keys' positions, and its base spec's path.
    ``noun`` names the file in errors (sweep, study); ``keys`` lists its main keys for the hint."""
    if not path.is_file():
        raise SpecError(f"{path}: {noun} file not found")
    data, where = read_yaml(path, f"a {noun} must be a mapping ({keys}, ...)")
    try:
        spec = model.model_validate(data)
    except ValidationError as e:
        raise SpecError("\n".join(_format(err, where, path, noun, model_at) for err in e.errors())) from None
    base = (path.parent / spec.base).resolve()  # type: ignore[attr-defined]
    if not base.is_file():
        raise SpecError(f"{where[('base',)]}: base: spec file not found: {base}")
    return spec, where, base


def _format(err: dict[str, Any], where: dict, path: Path, noun: str, model_at: ModelAt) -> str:
    loc = tuple(err["loc"])
    at = next((where[loc[:n]] for n in range(len(loc), -1, -1) if loc[:n] in where), Where(str(path)))
    field = ".".join(map(str, loc)) or f"<{noun}>"
    if err["type"] == "extra_forbidden":
        parent = model_at(loc[:-1])
        hint = did_you_mean(str(loc[-1]), list(parent.model_fields))
        return f"{at}: {field}: unknown key {loc[-1]!r}{hint}; allowed: {', '.join(parent.model_fields)}"
    got = f" (got {err['input']!r})" if "input" in err and not isinstance(err["input"], dict | list) else ""
    return f"{at}: {field}: {err['msg'].removeprefix('Value error, ')}{got}"


SEEDS = ("Train each row (trial) once per seed, each an ordinary run with train.seed set (N: seeds 1 to N); "
         "its figure is the mean over them.")


def checked_seeds(value: int | list[int] | None) -> int | list[int] | None:
    """An overlay's ``seeds``: a number of seeds (at least 1) or a list of distinct ones."""
    if isinstance(value, int) and value < 1:
        raise ValueError("a number of seeds is at least 1")
    if isinstance(value, list) and (not value or len(set(value)) != len(value)):
        raise ValueError("a list of seeds holds at least one seed, each once")
    return value


def seed_list(value: int | list[int] | None) -> list[int] | None:
    """The train.seed of each run that ``seeds`` asks for (N: 1 to N); None: one run, the spec's seed."""
    return list(range(1, value + 1)) if isinstance(value, int) else value
