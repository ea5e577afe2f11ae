"""A sweep file: a base spec and rows of overrides (the paper's Table 3 is one), plus optional grid
axes; validated with the same file:line errors as specs."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from tbuild.builder.loader import SpecError, Where
from tbuild.builder.overlay import SEEDS, checked_seeds, load_overlay, seed_list
from tbuild.components.spec_base import StrictModel

NAME = r"^[A-Za-z0-9][A-Za-z0-9_.+=-]*$"  # a row name is also a folder name


class PaperFigures(StrictModel):
    """What the paper reports for a row (Table 3: dev perplexity and BLEU, params × 10⁶)."""

    ppl: float | None = Field(None, gt=0, description="Perplexity per wordpiece on the development set.")
    bleu: float | None = Field(None, ge=0, description="BLEU on the development set.")
    params: float | None = Field(None, gt=0, description="Parameters × 10⁶.")


class RowSpec(StrictModel):
    """One trained model of the sweep."""

    name: str = Field(..., pattern=NAME, description="The row's name (its run folder starts with it).")
    label: str = Field("", description="The paper's group: base, A-E, big; rows of a group are compared "
                                       "with the reference row in the trend column.")
    set: dict[str, Any] = Field(default_factory=dict, description="Overrides of the base spec: dotted.key: value.")
    paper: PaperFigures | None = Field(None, description="The paper's figures for this row, printed beside ours.")


class SweepSpec(StrictModel):
    """A base spec, overrides shared by every row, the rows, and grid axes crossed with the rows."""

    base: str = Field(..., description="The spec every row extends (relative to the sweep file).")
    name: str | None = Field(None, pattern=NAME, description="Default: the sweep file's stem.")
    output_dir: str | None = Field(None, description="Default: runs/sweeps/<name> (relative to the cwd).")
    set: dict[str, Any] = Field(default_factory=dict, description="Overrides for every row: dotted.key: value.")
    rows: list[RowSpec] = Field(default_factory=list, description="Rows; none: the base spec alone.")
    grid: dict[str, list[Any]] = Field(default_factory=dict, description="Axes dotted.key: [values]; every row "
                                       "is trained at each point of their cross product.")
    reference: str | None = Field(None, description="The row trends compare against (default: the row labelled "
                                                     "base, else the first).")
    splits: list[Literal["valid", "test"]] = Field(
        ["valid", "test"], min_length=1, description="The splits every row is scored on; a search on validation "
        "alone: [valid] (then score the row it picks on test once, with tbuild evaluate).")
    seeds: int | list[int] | None = Field(None, description=SEEDS + " The table gives its standard deviation too.")

    _seeds = field_validator("seeds")(checked_seeds)


@dataclass(frozen=True)
class Row:
    """A row as the planner sees it: its overrides carry the sweep file's positions."""

    name: str
    label: str
    overrides: list[tuple[str, Where]]
    paper: PaperFigures | None


@dataclass(frozen=True)
class Sweep:
    path: Path
    spec: SweepSpec
    base: Path
    rows: list[Row]

    @property
    def name(self) -> str:
        return self.spec.name or self.path.stem

    @property
    def folder(self) -> Path:
        return Path(self.spec.output_dir) if self.spec.output_dir else Path("runs") / "sweeps" / self.name

    @property
    def seeds(self) -> list[int] | None:
        """The train.seed of each run of a row (``seeds: N``: 1 to N); None: one run, the spec's seed."""
        return seed_list(self.spec.seeds)


def load_sweep(path: Path) -> Sweep:
    """Read and validate a sweep file; its rows expanded (rows × grid), each with its overrides."""
    spec, where, base = load_overlay(path, SweepSpec, "sweep", "base, rows, grid", _model_at)

    def sets(values: dict[str, Any], at: tuple) -> list[tuple[str, Where]]:
        return [(f"{key}={json.dumps(value)}", where.get(at + (key,), where[()])) for key, value in values.items()]

    shared = sets(spec.set, ("set",))
    rows = [Row(r.name, r.label, shared + sets(r.set, ("rows", i, "set")), r.paper) for i, r in enumerate(spec.rows)]
    rows = rows or [Row("base", "base", shared, None)]
    if spec.grid:
        axes = list(spec.grid.items())
        rows = [Row(f"{row.name}-" + "-".join(f"{key.rsplit('.', 1)[-1]}={value}" for (key, _), value in
                                              zip(axes, point, strict=True)),
                    row.label, row.overrides + [(f"{key}={json.dumps(value)}", where.get(("grid", key), where[()]))
                                                for (key, _), value in zip(axes, point, strict=True)], None)
                for row in rows for point in itertools.product(*(values for _, values in axes))]
    names = [row.name for row in rows]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise SpecError(f"{where.get(('rows',), where[()])}: rows: names must differ ({', '.join(twice)} twice)")
    if spec.reference is not None and spec.reference not in names:
        raise SpecError(f"{where[('reference',)]}: reference: no row named {spec.reference!r}")
    return Sweep(path, spec, base, rows)


def _model_at(loc: tuple) -> type[StrictModel]:
    """The model that holds the key at ``loc`` + (key,)."""
    if not loc:
        return SweepSpec
    if loc[0] == "rows" and len(loc) == 2:
        return RowSpec
    return PaperFigures if loc[0] == "rows" else SweepSpec
