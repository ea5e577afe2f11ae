"""What ``train.init`` does to a run: at its start, take the source's tokenizer, load the planned weights,
freeze, carry Adam's moments and the schedule's step where asked, and record the lineage (init.json);
on every later call, freeze the same parts and read the schedule's offset back."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from tbuild.builder.schema import InitSpec

from ..data.tokenizer import Tokenizer
from ..errors import TbuildError
from ..files import atomic_write
from ..run_dir import RunDir
from .parts import frozen_names
from .plan import LoadPlan, apply_plan, make_plan
from .source import Source, load_source
from .vocab import extend_tokenizer

LINEAGE = "init.json"
Log = Callable[[str], None]


@dataclass
class Start:
    """A run's ``train.init``, applied once its model is built (before it is wrapped for several processes)."""

    init: InitSpec
    run: RunDir
    source: Source | None = None  # loaded only when the run starts
    plan: LoadPlan | None = None

    @property
    def lineage_file(self) -> Path:
        return self.run.path / LINEAGE

    @property
    def starting(self) -> bool:
        return not self.run.resume_points()

    def take_tokenizer(self, given: str | None, log: Log) -> None:
        """vocab refuse with no tokenizer named: the new run uses the source's (copied as spm.model)."""
        if not self.starting or self.init.vocab != "refuse" or given is not None or self.run.tokenizer.is_file():
            return
        source = self._source()
        tmp = self.run.tokenizer.with_suffix(".part")
        shutil.copyfile(source.tokenizer, tmp)
        tmp.replace(self.run.tokenizer)
        log(f"tokenizer: {source.tokenizer} (train.init's source's, copied to {self.run.tokenizer})")

    def extend_tokenizer(self, tokenizer: Tokenizer, log: Log) -> Tokenizer:
        """vocab extend, at the start: the run's own tokenizer (just trained on its data) becomes the source's
        with the pieces it lacks appended."""
        if not self.starting or self.init.vocab != "extend":
            return tokenizer
        if tokenizer.path.resolve() != self.run.tokenizer.resolve():
            raise TbuildError(f"train.init.vocab extend: the run trains its own tokenizer to find the new pieces; "
                              f"leave data.tokenizer.model unset (it names {tokenizer.path})")
        source = self._source().tokenizer
        added = extend_tokenizer(source, tokenizer.path, tokenizer.path)
        extended = Tokenizer.load(tokenizer.path)
        sp = extended.sp
        vocab = "".join(f"{sp.id_to_piece(i)}\t{sp.get_score(i)}\n" for i in range(extended.vocab_size))
        atomic_write(tokenizer.path.with_suffix(".vocab"), vocab.encode())
        log(f"tokenizer: {source}'s {extended.vocab_size - added:,} pieces kept, {added:,} of this run's own "
            f"appended -> {tokenizer.path} ({extended.vocab_size:,} pieces)")
        return extended

    def apply(self, model: nn.Module, tokenizer: Tokenizer, log: Log) -> None:
        """At the start: plan, load and freeze, and say so; later calls freeze the same parts."""
        if not self.starting:
            frozen = frozen_names(self.init.freeze, model)
            for name, param in model.named_parameters():
                param.requires_grad_(name not in frozen)
            log(f"train.init: started from {self.lineage().get('from')} (see {self.lineage_file.name})"
                f"{f'; {len(frozen)} tensors frozen' if frozen else ''}")
            return
        self.plan = make_plan(model, self._source(), self.init, tokenizer)
        apply_plan(self.plan, model)
        for line in (self.plan.header(), *self.plan.block_lines(), self.plan.summary()):
            log(line)

    def carry_optimizer(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        """Without reset: optimizer, Adam's moments of each tensor loaded unchanged and trained."""
        if not self.starting or "optimizer" in self.init.reset or self.plan is None:
            return
        slots = self.plan.source.optimizer_state
        if not slots:
            raise TbuildError(f"train.init.reset without optimizer: {self.plan.source.weights} holds no optimizer "
                              "state by parameter name; name a step checkpoint of a run trained by this version in "
                              "train.init.from, or reset the optimizer")
        params = dict(model.named_parameters())
        for e in self.plan.entries:
            if e.status == "loaded" and not e.frozen and e.name in slots:
                param = params[e.name]
                optimizer.state[param] = {k: v.clone().to(param.device) if k != "step" else v.clone()
                                          for k, v in slots[e.name].items()}

    def record(self) -> None:
        """Write init.json at the start (main process)."""
        if self.plan is None:
            return
        offset = 0 if "schedule" in self.init.reset else self.plan.source.step
        data = {**self.plan.source.lineage(), "schedule_offset": offset,
                "tensors": {e.name: e.status for e in self.plan.entries},
                "frozen": [e.name for e in self.plan.entries if e.frozen]}
        atomic_write(self.lineage_file, (json.dumps(data, indent=1) + "\n").encode())

    def lineage(self) -> dict:
        try:
            return json.loads(self.lineage_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def schedule_offset(self) -> int:
        """Steps the learning-rate schedule is ahead of this run's own (the source's, unless reset)."""
        if self.plan is not None:
            return 0 if "schedule" in self.init.reset else self.plan.source.step
        return int(self.lineage().get("schedule_offset", 0))

    def _source(self) -> Source:
        if self.source is None:
            self.source = load_source(self.init)
        return self.source


def read_lineage(run: RunDir) -> dict | None:
    """A run's init.json (where it was started from), or None."""
    try:
        return json.loads((run.path / LINEAGE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
