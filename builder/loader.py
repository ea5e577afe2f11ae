"""Load a spec: YAML/JSON with line numbers, ``extends`` chains, ``--set`` overrides, and errors
that name the file, line, field and what is allowed."""

from __future__ import annotations

import copy
import difflib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from tbuild.components.registry import Kinds

from .spec import FieldError, Spec

Path_ = tuple[str | int, ...]


class SpecError(Exception):
    """A user-facing spec problem; ``str()`` is the whole message (one line per problem)."""


@dataclass(frozen=True)
class Where:
    """Where a value came from: a file position or a command-line override."""

    file: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}" if self.line else self.file


@dataclass
class LoadedSpec:
    """A validated spec plus where it came from."""

    spec: Spec
    path: Path | None
    raw: dict
    where: dict[Path_, Where]

    @property
    def name(self) -> str:
        return self.spec.name or (self.path.stem if self.path else "spec")

# Keys whose values are paths relative to the file that sets them.
MERGED_KINDS: frozenset[Path_] = frozenset({("model",)})  # sections whose kind is not a component's

PATH_KEYS: dict[Path_, tuple[str, ...]] = {
    ("data", "train"): ("", "source", "target"),
    ("data", "valid"): ("", "source", "target"),
    ("data", "test"): ("", "source", "target"),
    ("data", "tokenizer", "model"): ("",),
    ("data", "dataset", "wsj"): ("",),
}


def read_yaml(path: Path, what: str = "a spec must be a mapping of sections (model, data, train, decode)",
              ) -> tuple[Any, dict[Path_, Where]]:
    """Parse YAML or JSON; record each key's position; refuse duplicate keys and a top level that is
    not a mapping (``what`` says what it must be)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{path}: spec file not found") from None
    except UnicodeDecodeError as e:
        raise SpecError(f"{path}: not valid UTF-8 (byte {e.start})") from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return {}, {}
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise SpecError(f"{where}: YAML syntax error: {e.problem}") from None
    finally:
        loader.dispose()
    where: dict[Path_, Where] = {(): Where(str(path), node.start_mark.line + 1, node.start_mark.column + 1)}

    def walk(n: yaml.Node, at: Path_) -> None:
        if isinstance(n, yaml.MappingNode):
            seen: set = set()
            for k, v in n.value:
                key = k.value
                if key in seen:
                    raise SpecError(f"{path}:{k.start_mark.line + 1}:{k.start_mark.column + 1}: "
                                    f"duplicate key {'.'.join(map(str, at + (key,)))}")
                seen.add(key)
                where[at + (key,)] = Where(str(path), k.start_mark.line + 1, k.start_mark.column + 1)
                walk(v, at + (key,))
        elif isinstance(n, yaml.SequenceNode):
            for i, v in enumerate(n.value):
                where[at + (i,)] = Where(str(path), v.start_mark.line + 1, v.start_mark.column + 1)
                walk(v, at + (i,))

    walk(node, ())
    if not isinstance(data, dict):
        raise SpecError(f"{where[()]}: {what}")
    return data, where


def map_paths(data: dict, change: Callable[[str], str]) -> None:
    """Replace, in place, every path a spec's data holds (``PATH_KEYS``) by ``change(path)``."""
    for key_path, subkeys in PATH_KEYS.items():
        parent = data
        for k in key_path[:-1]:
            parent = parent.get(k) if isinstance(parent, dict) else None
        if not isinstance(parent, dict) or key_path[-1] not in parent:
            continue
        value = parent[key_path[-1]]
        if isinstance(value, str) and "" in subkeys:
            parent[key_path[-1]] = change(value)
        elif isinstance(value, dict):
            for sub in subkeys:
                if sub and isinstance(value.get(sub), str):
                    value[sub] = change(value[sub])


def _resolve_paths(data: dict, where: dict[Path_, Where], base: Path) -> None:
    """Make relative data paths absolute against the directory of the file that set them."""
    map_paths(data, lambda value: os.path.normpath(base / value))


def merge(base: dict, over: dict, where_base: dict[Path_, Where], where_over: dict[Path_, Where],
          at: Path_ = ()) -> dict:
    """Deep-merge ``over`` into a copy of ``base``. A component whose ``kind`` changes is replaced,
    not merged, so options of the old kind do not leak into the new one. The model section's ``kind``
    (its graph) is an ordinary field: the section merges (a stack the new kind lacks is refused by name)."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        old = out.get(key)
        replace = not (isinstance(old, dict) and isinstance(value, dict)) or (
            "kind" in value and old.get("kind") != value["kind"] and at + (key,) not in MERGED_KINDS
        )
        if replace:
            for p in [p for p in where_base if p[: len(at) + 1] == at + (key,) and len(p) > len(at) + 1]:
                del where_base[p]
            out[key] = copy.deepcopy(value)
        else:
            out[key] = merge(old, value, where_base, where_over, at + (key,))
    where_base.update({p: w for p, w in where_over.items() if p[: len(at)] == at and p != at})
    return out


def _load_chain(path: Path, seen: list[Path]) -> tuple[dict, dict[Path_, Where]]:
    resolved = path.resolve()
    if resolved in seen:
        chain = " -> ".join(str(p) for p in seen + [resolved])
        raise SpecError(f"{path}: extends cycle: {chain}")
    data, where = read_yaml(path)
    _resolve_paths(data, where, resolved.parent)
    parent = data.pop("extends", None)
    if parent is None:
        return data, where
    if not isinstance(parent, str):
        raise SpecError(f"{where[('extends',)]}: extends must be a path to another spec file")
    parent_path = resolved.parent / parent
    if not parent_path.exists():
        raise SpecError(f"{where[('extends',)]}: extends: file not found: {parent_path}")
    base, base_where = _load_chain(parent_path, seen + [resolved])
    where.pop(("extends",), None)
    return merge(base, data, base_where, where), base_where


def parse_override(text: str) -> tuple[Path_, Any]:
    """``model.d_model=1024`` -> (("model", "d_model"), 1024); the value is read as YAML."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or any(not part for part in key.strip().split(".")):
        raise SpecError(f"--set {text}: expected KEY=VALUE with a dotted key, e.g. model.d_model=1024")
    try:
        parsed = yaml.safe_load(value) if value.strip() else None
    except yaml.YAMLError as e:
        raise SpecError(f"--set {text}: value is not valid YAML: {getattr(e, 'problem', e)}") from None
    path: Path_ = tuple(int(p) if p.isdigit() else p for p in key.strip().split("."))
    return path, parsed


Override = str | tuple[str, Where]  # KEY=VALUE, from the command line or from a file position


def apply_override(data: dict, where: dict[Path_, Where], override: Override) -> None:
    text, at = override if isinstance(override, tuple) else (override, Where(f"--set {override}"))
    path, value = parse_override(text)
    over: Any = value
    for part in reversed(path):
        over = {part: over}
    over_where = {path[:i]: at for i in range(1, len(path) + 1)}
    merged = merge(data, over, where, over_where)
    data.clear()
    data.update(merged)


def load_spec(source: str | Path | dict, overrides: list[Override] | None = None) -> LoadedSpec:
    """Read, merge, override and validate a spec; raise ``SpecError`` with a clear message. An
    override is ``KEY=VALUE`` (errors name ``--set KEY=VALUE``) or ``(KEY=VALUE, Where)`` (errors
    name that position, e.g. a sweep file's line)."""
    if isinstance(source, dict):
        path, data, where = None, copy.deepcopy(source), {(): Where("<dict>")}
    else:
        path = Path(source)
        data, where = _load_chain(path, [])
    for override in overrides or []:
        apply_override(data, where, override)
    try:
        spec = Spec.model_validate(data)
    except ValidationError as e:
        raise SpecError("\n".join(format_error(err, data, where) for err in e.errors())) from None
    return LoadedSpec(spec, path, data, where)


def _nearest(where: dict[Path_, Where], loc: Path_) -> Where:
    for n in range(len(loc), -1, -1):
        if loc[:n] in where:
            return where[loc[:n]]
    return where.get((), Where("<spec>"))


def _data_path(loc: tuple, data: Any) -> Path_:
    """pydantic's ``loc`` as a spec path: union tags (``kind`` values) and validator names dropped."""
    out: list[str | int] = []
    node: Any = data
    for part in loc:
        in_dict = isinstance(node, dict) and part in node
        if in_dict or isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        elif isinstance(node, dict) and node.get("kind") == part:
            continue  # the discriminated union's tag
        elif isinstance(part, str) and ("[" in part or "-" in part):
            continue  # e.g. function-after[...], int-parsed
        else:
            node = None
        out.append(part)
    return tuple(out)


def _allowed_keys(loc: tuple) -> list[str]:
    """The field names allowed in the model at ``loc`` (for 'did you mean')."""
    from tbuild.builder.spec import Spec as Root

    node: Any = Root  # a model class, or the Kinds of a registry-backed field
    for part in loc:
        if isinstance(node, Kinds):  # the part is the union's tag (a ``kind``)
            node = node.registry[part].spec if isinstance(part, str) and part in node.registry else None
        else:
            fields = _fields_by_key(node)
            if fields is None:
                return []
            if part in fields:
                node = _model_of(fields[part])
            elif not isinstance(part, int):  # list indices keep the item model
                return []
        if node is None:
            return []
    return list(_fields_by_key(node) or {})


def _fields_by_key(model: Any) -> dict[str, FieldInfo] | None:
    """A model's fields under the keys a spec file writes (a field's alias where it has one, e.g. from)."""
    fields = getattr(model, "model_fields", None)
    return None if fields is None else {f.alias or name: f for name, f in fields.items()}


def _model_of(field: FieldInfo) -> Any:
    """The registry-backed union (``Kinds``) or the pydantic model inside a field's annotation
    (through Optional and list)."""
    for meta in field.metadata:
        if isinstance(meta, Kinds):
            return meta
    return _find_model(field.annotation)


def _find_model(annotation: Any) -> Any:
    if get_origin(annotation) is Annotated:
        kinds = [meta for meta in annotation.__metadata__ if isinstance(meta, Kinds)]
        if kinds:
            return kinds[0]
        annotation = get_args(annotation)[0]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _find_model(arg)
        if found is not None:
            return found
    return None


def format_error(err: dict, data: dict, where: dict[Path_, Where]) -> str:
    """One line: file:line:col: field.path: problem (allowed / did you mean)."""
    loc = tuple(err["loc"])
    ctx = err.get("ctx") or {}
    cause = ctx.get("error")
    if isinstance(cause, FieldError):
        loc = loc + cause.path
    path = _data_path(loc, data)
    field = ".".join(map(str, path)) or "<spec>"
    kind = err["type"]
    if kind == "extra_forbidden":
        bad = str(loc[-1])
        allowed = _allowed_keys(loc[:-1])
        hint = did_you_mean(bad, allowed)
        msg = f"unknown key {bad!r}{hint}; allowed: {', '.join(allowed)}" if allowed else f"unknown key {bad!r}"
    elif kind == "union_tag_invalid":
        tags = [t.strip().strip("'") for t in str(ctx.get("expected_tags", "")).split(",")]
        got = str(ctx.get("tag"))
        msg = f"unknown kind {got!r}{did_you_mean(got, tags)}; registered kinds: {', '.join(tags)}"
        field = field + ".kind" if not field.endswith(".kind") else field
        path = path + ("kind",)
    elif kind == "union_tag_not_found":
        msg = "missing 'kind' (which variant to use)"
    elif kind == "missing":
        msg = "required field is missing"
    elif isinstance(cause, ValueError):
        msg = str(cause)
    else:
        msg = err["msg"]
        if "input" in err and not isinstance(err["input"], dict | list):
            msg += f" (got {err['input']!r})"
    return f"{_nearest(where, path)}: {field}: {msg}"


def did_you_mean(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
