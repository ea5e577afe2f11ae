"""What ``train.init`` makes of a run, resolved before the trainer exists: at the run's start, the
tokenizer (the source's, or this run's extended with the source's pieces), the planned weights, the
frozen parts, Adam's moments and the schedule's step where asked, and the lineage (init.json); on every
later call, the same frozen parts and the schedule's offset read back. The trainer gets plain
``Initial`` values and knows nothing of fine-tuning."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from tbuild.builder import LoadedSpec, build_model
from tbuild.builder.spec import InitSpec, Spec

from ..data.tokenizer import Tokenizer, prepare_tokenizer, recorded
from ..errors import TbuildError
from ..files import atomic_write
from ..run.adapters import read_record
from ..run.directory import RunDir
from ..start.values import Initial, Patch
from .lora import adapter_start
from .parts import frozen_names
from .plan import LoadPlan, check_kinds, make_plan
from .source import Source, load_source
from .vocab import check_extendable, extend_tokenizer

Log = Callable[[str], None]


def start_source(spec: Spec, run: RunDir) -> Source | None:
    """The trained model ``train.init`` names, loaded once where the run starts from it (no checkpoint
    yet); None without ``train.init`` or on a later call. Refused here as ``checked_source`` refuses it,
    before the run writes anything."""
    init = spec.train.init
    if init is None or (run.resume_points() and spec.train.adapters is None):
        return None
    if spec.train.adapters is not None and read_record(run.path) is not None:
        return None  # an adapter run reads its base from adapters.json, checked by its checksum
    return checked_source(spec)


def checked_source(spec: Spec) -> Source:
    """``train.init``'s trained model, loaded, with what refuses it as soon as it is known (before the run writes
    anything): a model kind that shares no stack with the spec's, a tokenizers file to extend."""
    init = spec.train.init
    assert init is not None
    source = load_source(init)
    check_kinds(spec.model, source)
    if init.vocab == "extend":
        check_extendable(source.tokenizer)
    return source


@contextmanager
def init_located(loaded: LoadedSpec) -> Iterator[None]:
    """Errors about ``train.init`` (``train.init: ...``, ``train.init.freeze: ...``) begin with where the
    spec sets it (file:line:column, or the --set that did)."""
    try:
        yield
    except TbuildError as e:
        if not str(e).startswith("train.init"):
            raise
        where = loaded.where
        at = next((where[k] for k in (("train", "init", "from"), ("train", "init"), ("train",)) if k in where),
                  loaded.path or "the spec")
        raise TbuildError(f"{at}: {e}") from None


def start_tokenizer(spec: Spec, run: RunDir, source: Source | None, log: Log, *, main: bool = True) -> Tokenizer:
    """The run's tokenizer (``prepare_tokenizer``); at the start of a run from ``source``, the main process
    first takes the source's (vocab refuse, none named) or then extends its own (vocab extend)."""
    init = spec.train.init
    if main and source is not None and init is not None and init.vocab == "refuse" \
            and spec.data.tokenizer.model is None and not run.tokenizer.is_file():
        dest = run.tokenizer_for(source.tokenizer)
        tmp = dest.with_suffix(".part")
        shutil.copyfile(source.tokenizer, tmp)
        tmp.replace(dest)
        log(f"tokenizer: {source.tokenizer} (train.init's source's, copied to {dest})")
    if source is not None and init is not None and init.vocab == "refuse" and spec.data.tokenizer.special is None:
        spec = recorded(spec, source.run.spec.data.tokenizer.special)  # the source's tokenizer: its special ids
    tokenizer = prepare_tokenizer(spec, run, log)
    if main and source is not None and init is not None and init.vocab == "extend":
        return _extended(tokenizer, run, source.tokenizer, log)
    return tokenizer


def _extended(tokenizer: Tokenizer, run: RunDir, source: Path, log: Log) -> Tokenizer:
    """The run's own tokenizer (just trained on its data) made the source's with the pieces it lacks appended."""
    if tokenizer.path.resolve() != run.tokenizer.resolve():
        raise TbuildError(f"train.init.vocab extend: the run trains its own tokenizer to find the new pieces; "
                          f"leave data.tokenizer.model unset (it names {tokenizer.path})")
    added = extend_tokenizer(source, tokenizer.path, tokenizer.path)
    extended = Tokenizer.load(tokenizer.path, tokenizer.special)
    sp = extended.sp
    vocab = "".join(f"{sp.id_to_piece(i)}\t{sp.get_score(i)}\n" for i in range(extended.vocab_size))
    atomic_write(tokenizer.path.with_suffix(".vocab"), vocab.encode())
    log(f"tokenizer: {source}'s {extended.vocab_size - added:,} pieces kept, {added:,} of this run's own "
        f"appended -> {tokenizer.path} ({extended.vocab_size:,} pieces)")
    return extended


def resolve_start(spec: Spec, run: RunDir, tokenizer: Tokenizer, source: Source | None, log: Log, *,
                  main: bool = True) -> Initial:
    """The ``Initial`` values of ``spec`` (resolved against ``tokenizer``) in ``run``: none without
    ``train.init``; at the start, planned from ``source`` (the main process says the plan and writes
    init.json); later, the frozen parts and the schedule's offset of the run's start."""
    init = spec.train.init
    if init is None:
        return Initial()
    with torch.device("meta"):  # names and shapes only: nothing allocated
        model = build_model(spec)
    if spec.train.adapters is not None:
        return adapter_start(spec, run, model, tokenizer, source, log, main=main)
    if source is None:  # a later call: the run started from its source before
        frozen = frozen_names(init.freeze, model)
        lineage = run.lineage() or {}
        log(f"train.init: started from {lineage.get('from')} (see {run.lineage_file.name})"
            f"{f'; {len(frozen)} tensors frozen' if frozen else ''}")
        return Initial(frozen=frozenset(frozen), schedule_offset=int(lineage.get("schedule_offset", 0)))
    plan = make_plan(model, source, init, tokenizer)
    for line in plan.lines():
        log(line)
    offset = 0 if "schedule" in init.reset else plan.source.step
    initial = Initial(_patches(plan), frozenset(e.name for e in plan.entries if e.frozen), _moments(plan, init),
                      offset)
    if main:
        _record(plan, run, offset)
    return initial


def _patches(plan: LoadPlan) -> dict[str, Patch]:
    """The tensors the plan writes: loaded and copied ones whole, remapped ones by vocabulary row."""
    patches = {}
    tensors = plan.source.tensors
    for e in plan.entries:
        if e.status in ("loaded", "copied") and e.source_name is not None:
            patches[e.name] = Patch(tensors[e.source_name])
        elif e.status == "remapped" and e.source_name is not None:
            old_ids = torch.tensor(list(plan.rows.values()), dtype=torch.long)
            patches[e.name] = Patch(tensors[e.source_name][old_ids], torch.tensor(list(plan.rows), dtype=torch.long))
    return patches


def _moments(plan: LoadPlan, init: InitSpec) -> dict[str, dict[str, torch.Tensor]]:
    """Without reset: optimizer, Adam's moments of each tensor loaded unchanged and trained."""
    if "optimizer" in init.reset:
        return {}
    slots = plan.source.optimizer_state
    if not slots:
        raise TbuildError(f"train.init.reset without optimizer: {plan.source.weights} holds no optimizer "
                          "state by parameter name; name a step checkpoint of a run trained by this version in "
                          "train.init.from, or reset the optimizer")
    return {e.name: slots[e.source_name] for e in plan.entries
            if e.status == "loaded" and not e.frozen and e.source_name in slots}


def _record(plan: LoadPlan, run: RunDir, offset: int) -> None:
    """Write init.json: where the run started from, each tensor's status and the frozen ones."""
    data = {**plan.source.lineage(), "schedule_offset": offset,
            "tensors": {e.name: e.status for e in plan.entries},
            "frozen": [e.name for e in plan.entries if e.frozen]}
    atomic_write(run.lineage_file, (json.dumps(data, indent=1) + "\n").encode())
