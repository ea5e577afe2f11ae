"""Where an adapter run (``train.adapters``) begins: its base, the model of ``train.init`` loaded whole and
frozen, and the low-rank adapters on the targeted modules (``components/lora.py``). The base is loaded on
every call (the run's checkpoints hold the adapters only) and checked against the checksum recorded in
``adapters.json`` at the run's start."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from tbuild.builder.inspect import meta_model
from tbuild.builder.spec import InitSpec, Spec
from tbuild.components.lora import Adapters, adapter_names, match_targets

from ..data.tokenizer import Tokenizer
from ..errors import TbuildError
from ..run.adapters import base_record, base_tensors, read_record, write_record
from ..run.directory import RunDir
from ..run.weights import weights_files
from ..start.values import Initial, Patch
from .plan import make_plan
from .source import Source

Log = Callable[[str], None]


def adapters_of(spec: Spec, model: nn.Module) -> Adapters:
    """The spec's adapters on ``model`` (built from it); refused: a target that matches nothing, and a rank above
    the narrowest adapted layer's width (B A has rank at most min(in, out) there: the rest would be dead weight)."""
    cfg = spec.train.adapters
    assert cfg is not None
    try:
        modules = match_targets(model, cfg.targets)
    except ValueError as e:
        raise TbuildError(f"train.adapters.targets: {e}") from None
    layers = {m: model.get_submodule(m) for m in modules}
    narrowest = min(modules, key=lambda m: min(layers[m].in_features, layers[m].out_features))
    layer = layers[narrowest]
    if cfg.r > min(layer.in_features, layer.out_features):
        raise TbuildError(f"train.adapters.r {cfg.r}: above the width of {narrowest} ({layer.in_features} -> "
                          f"{layer.out_features}), which bounds the rank of its update B A; set r <= "
                          f"{min(layer.in_features, layer.out_features)}")
    return Adapters(modules, cfg.r, cfg.alpha, cfg.dropout)


def check_adapters(spec: Spec) -> None:
    """``train.adapters`` refused as ``adapters_of`` refuses it, on the model built on the meta device, before a
    run writes anything (a head's labels ``from_data`` stand in as two: the head is never adapted)."""
    if spec.train.adapters is None:
        return
    head = spec.model.output_head
    if head.label_set() == "from_data":
        spec = spec.model_copy(update={"model": spec.model.model_copy(
            update={"head": head.model_copy(update={"labels": ["_", "__"]})})})
    adapters_of(spec, meta_model(spec))


def adapter_start(spec: Spec, run: RunDir, model: nn.Module, tokenizer: Tokenizer, source: Source | None,
                  log: Log, *, main: bool = True) -> Initial:
    """The ``Initial`` values of an adapter run: the base's tensors, every parameter of the model frozen,
    the adapters; at the start, the base is ``source`` and its reference is written (main process)."""
    init = spec.train.init
    assert init is not None
    adapters = adapters_of(spec, model)
    record = read_record(run.path)
    if record is None:
        if source is None or run.resume_points():
            raise TbuildError(f"train.adapters: {run.path} has checkpoints but no adapters.json (the reference "
                              "to its base): it was not trained with adapters; train them into a new output_dir")
        tensors, record = _first(spec, model, tokenizer, source, init, adapters)
        if main:
            write_record(run.path, record)
    else:
        _same_adapters(record, adapters)
        tensors = base_tensors(record)
    trainable = sum(model.get_submodule(m).weight.shape[1] * adapters.r + model.get_submodule(m).weight.shape[0]
                    * adapters.r for m in adapters.modules)
    total = sum(p.numel() for p in model.parameters())
    log(f"train.adapters: lora r={adapters.r} alpha={adapters.alpha:g} on {len(adapters.modules)} modules "
        f"({len(adapter_names(adapters))} tensors, {trainable:,} parameters trained; the base's {total:,} frozen, "
        f"from {record['base']['run']})")
    names = [n for n, _ in model.named_parameters()]
    return Initial({n: Patch(tensors[n]) for n in names}, frozenset(names), adapters=adapters,
                   schedule_offset=int(record.get("schedule_offset", 0)))


def _first(spec: Spec, model: nn.Module, tokenizer: Tokenizer, source: Source, init: InitSpec,
           adapters: Adapters) -> tuple[dict, dict]:
    """The base's tensors by parameter name and the record of it, at the run's start: refused unless the
    model is the base's and every one of its parameters loads unchanged."""
    base_spec = source.run.spec
    if base_spec.train.adapters is not None:
        raise TbuildError(f"train.init: {source.run.dir.path} is itself an adapter run; merge it first "
                          "(tbuild merge) and start from the merged run")
    if base_spec.architecture_hash() != spec.architecture_hash():
        raise TbuildError(f"train.adapters: the model section must be its base's ({source.run.dir.path}): "
                          "adapters train on its weights unchanged; drop train.adapters to fine-tune another shape")
    plan = make_plan(model, source, init, tokenizer)
    other = [e.name for e in plan.entries if e.status != "loaded"]
    if other:
        raise TbuildError(f"train.adapters: {len(other)} of the model's tensors do not load from the base "
                          f"unchanged ({', '.join(other[:3])}); leave train.init's include, exclude and copy unset")
    files = weights_files(source.run, checkpoint=source.run.checkpoint, average=init.average)
    offset = 0 if "schedule" in init.reset else source.step
    return source.tensors, base_record(source.run.dir.path, files, init.average is not None, source.step,
                                       source.tensors, adapters, offset)


def _same_adapters(record: dict, adapters: Adapters) -> None:
    """Refuse adapters that changed shape or place since the run started (its checkpoints hold the old ones)."""
    lora = record["lora"]
    if (lora["r"], tuple(lora["modules"])) != (adapters.r, adapters.modules) or lora["alpha"] != adapters.alpha:
        raise TbuildError(f"train.adapters changed since the run started (r {lora['r']}, alpha {lora['alpha']:g}, "
                          f"{len(lora['modules'])} modules when its checkpoints were written); train them into a new "
                          "output_dir")
