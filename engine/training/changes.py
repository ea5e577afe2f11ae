"""What changed between a run's stored spec and the spec it is trained on again, and what each change
does: nothing a user changes is ignored unsaid."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tbuild.builder import LoadedSpec, SpecError, load_spec
from tbuild.builder.spec import Spec

from ..errors import TbuildError
from ..run.directory import Run, RunDir, run_dir_of

# (dotted prefix, kind, what the change does), first match wins.
RULES: tuple[tuple[str, str, str], ...] = (
    ("model.", "architecture", "refused: the run's checkpoints hold the model as it was"),
    ("data.tokenizer.sampling", "data", "the training split is encoded again, sampled as it says, and read from "
     "the start of a new epoch"),
    ("data.tokenizer.", "tokenizer", "refused: the run keeps the tokenizer it was trained with (spm.model)"),
    ("data.valid", "evaluation", "validation reads the new split from now on"),
    ("data.test", "evaluation", "free: read by `tbuild evaluate`"),
    ("data.", "data", "the training split is prepared again and read from the start of a new epoch"),
    ("train.init.freeze", "freeze", "refused: the optimizer holds the trainable tensors as they were"),
    ("train.init", "init", "no effect on a run already started: it began from its source (init.json)"),
    ("train.schedule.", "schedule", "the learning rate follows the new schedule from the step resumed at"),
    ("train.optimizer.", "optimizer", "takes effect from the step resumed at; Adam's moment estimates are kept"),
    ("train.max_", "budget", "the run's stops, checked from now on"),
    ("train.", "training", "takes effect from the step resumed at"),
    ("decode.", "decoding", "free: used when decoding"),
)
REFUSED = {"architecture", "tokenizer", "freeze"}
IGNORED = {"name", "output_dir", "extends"}  # where the run lives and what it is called, not what it is


@dataclass(frozen=True)
class Change:
    field: str
    old: Any
    new: Any
    kind: str
    effect: str

    @property
    def refused(self) -> bool:
        return self.kind in REFUSED

    def line(self) -> str:
        return f"{self.field}: {_show(self.old)} → {_show(self.new)} ({self.effect})"


def spec_changes(old: Spec, new: Spec) -> list[Change]:
    """Every leaf field whose value differs between two resolved specs, classified by RULES."""
    before, after = _flat(old.model_dump(mode="json")), _flat(new.model_dump(mode="json"))
    changes = []
    for field in sorted(before.keys() | after.keys()):
        if field.split(".")[0] in IGNORED or before.get(field) == after.get(field):
            continue
        kind, effect = next((k, e) for prefix, k, e in RULES if field.startswith(prefix))
        changes.append(Change(field, before.get(field), after.get(field), kind, effect))
    return changes


def refusal(changes: list[Change], where: str) -> str | None:
    """The one error for changes a run cannot resume with (None: it can)."""
    refused = [c for c in changes if c.refused]
    if not refused:
        return None
    fields = "; ".join(f"{c.field}: {_show(c.old)} → {_show(c.new)}" for c in refused)
    return (f"{where} cannot go on with {fields}: its checkpoints, tokenizer and optimizer hold them as they "
            "were. Train into another directory (--set output_dir=...) or start this one over with --fresh")


def stored_changes(run: RunDir, spec: Spec) -> list[Change]:
    """The changes from the spec ``run`` was last trained with to ``spec`` (none for a new run);
    a TbuildError for those it cannot resume with."""
    if not run.spec_file.is_file():
        return []
    try:
        old = load_spec(run.spec_file).spec
    except SpecError:
        return []  # not a resolved spec of this version: write_spec says what is wrong with it
    changes = spec_changes(old, spec)
    why = refusal(changes, str(run.path))
    if why:
        raise TbuildError(why)
    return changes


def changes_since_last_call(loaded: LoadedSpec) -> tuple[RunDir, list[Change] | None]:
    """What ``tbuild train`` would find changed in ``loaded``'s run directory, without training (None:
    no run there yet); a TbuildError where it would refuse."""
    from ..data.tokenizer import fit_vocab, run_tokenizer
    from ..tasks.registry import task_of

    run = run_dir_of(loaded)
    if not run.spec_file.is_file():
        return run, None
    tokenizer = run_tokenizer(Run(loaded.spec, run).tokenizer, loaded.spec)
    quiet = lambda _: None  # noqa: E731
    # as the trainer resolves it (engine/training/run.py): the vocabulary and a head's labels from_data
    spec = task_of(loaded.spec).fit_labels(fit_vocab(loaded.spec, tokenizer, quiet), quiet)
    spec = spec.model_copy(update={"name": loaded.name})
    return run, stored_changes(run, spec)


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(_flat(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: data}


def _show(value: Any) -> str:
    return "(unset)" if value is None else str(value)
