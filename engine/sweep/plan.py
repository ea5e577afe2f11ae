"""A sweep's plan: every row's spec validated before anything trains, its run folder (row name and
spec hash), parameters, FLOPs per token and training budget."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from tbuild.builder import LoadedSpec, SpecError, load_spec
from tbuild.builder.inspect import inspect_model
from tbuild.builder.loader import Override

from .result import RowResult, read_result, result_file
from .spec import Row, Sweep


@dataclass(frozen=True)
class PlannedRow:
    row: Row
    loaded: LoadedSpec  # output_dir set to ``folder``
    folder: Path
    params: int
    flops_per_token: int
    splits: tuple[str, ...] = ("valid", "test")  # scored after training (the sweep file's ``splits``)
    seed: int | None = None  # train.seed of this run of the row (the sweep file's ``seeds``), None: the spec's

    @property
    def title(self) -> str:
        """The row's name, and its seed where the sweep has seeds: ``A-h1 (seed 2)``."""
        return self.row.name if self.seed is None else f"{self.row.name} (seed {self.seed})"

    @property
    def result_file(self) -> Path:
        return result_file(self.folder)  # sweep_row.json, once the row is trained and scored

    @property
    def finished(self) -> bool:
        return self.result_file.is_file()

    def result(self) -> RowResult | None:
        """The row's scores once it finished (None before, or if the file is unreadable)."""
        return read_result(self.folder)

    def budget(self) -> str:
        """The training budget in words, from the spec's stops."""
        t = self.loaded.spec.train
        parts = [f"{t.max_steps:,} steps" if t.max_steps else "", f"{t.max_epochs} epochs" if t.max_epochs else "",
                 f"{t.max_minutes:g} min" if t.max_minutes else ""]
        return ", ".join(p for p in parts if p)


def spec_hash(loaded: LoadedSpec) -> str:
    """What makes two rows the same experiment: the resolved spec, wherever and on how many threads it
    trains."""
    data = loaded.spec.model_dump(mode="json", exclude={"extends": True, "output_dir": True, "name": True,
                                                        "train": {"threads"}})
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:8]


def plan(sweep: Sweep, overrides: list[str] | None = None, only: list[str] | None = None) -> list[PlannedRow]:
    """Every row (or those named in ``only``) validated, with ``overrides`` (``--set``) applied last;
    all errors of all rows are reported together, before anything trains."""
    names = [row.name for row in sweep.rows]
    unknown = [n for n in only or [] if n not in names]
    if unknown:
        raise SpecError(f"--only {','.join(unknown)}: no such row in {sweep.path}; rows: {', '.join(names)}")
    rows = [row for row in sweep.rows if not only or row.name in only]
    planned, errors = [], []
    for row in rows:
        for seed in sweep.seeds or [None]:  # the seed last: each run of a row differs in it alone
            seeded = [f"train.seed={seed}"] if seed is not None else []
            extra: list[Override] = [*row.overrides, *(overrides or []), *seeded]
            try:
                loaded = load_spec(sweep.base, [*extra, f"name={json.dumps(row.name)}"])
            except SpecError as e:
                errors.extend(f"row {row.name}: {line}" for line in str(e).splitlines())
                break
            folder = sweep.folder / f"{row.name}-{spec_hash(loaded)}"  # seed 1: the folder without seeds
            loaded.spec = loaded.spec.model_copy(update={"output_dir": str(folder)})
            report = inspect_model(loaded.spec)
            planned.append(PlannedRow(row, loaded, folder, report.total, report.flops_per_token,
                                      tuple(sweep.spec.splits), seed))
    if errors:
        raise SpecError("\n".join(errors))
    return planned


def minutes_left(rows: list[PlannedRow]) -> float | None:
    """Training minutes the unfinished rows need: a time budget as it stands; a step budget at the
    speed of the finished rows (minutes per step and FLOP per token), None before one has finished."""
    done = [(p, r) for p in rows if p.finished and (r := p.result()) and r.steps]
    work = sum(r.steps * p.flops_per_token for p, r in done)
    per_work = sum(r.train_minutes for _, r in done) / work if work else None
    total = 0.0
    for p in rows:
        if p.finished:
            continue
        t = p.loaded.spec.train
        if t.max_minutes:
            total += t.max_minutes
        elif t.max_steps and per_work is not None:
            total += t.max_steps * p.flops_per_token * per_work
        else:
            return None
    return total


def by_row(rows: list[PlannedRow]) -> dict[str, list[PlannedRow]]:
    """The planned runs of each row (one per seed), rows in their order."""
    out: dict[str, list[PlannedRow]] = {}
    for p in rows:
        out.setdefault(p.row.name, []).append(p)
    return out


def reference_name(rows: list[PlannedRow], reference: str | None = None) -> str:
    """The row the others are compared with: the sweep file's ``reference``, else the row labelled base, else
    the first."""
    return reference or next((p.row.name for p in rows if p.row.label == "base"), rows[0].row.name)
