"""A study file (`tbuild tune`): a base spec, a search space over its fields, the objective on
validation, the budget, the sampler and the pruner; validated with the same file:line errors as
specs and sweeps, and every value of the space checked against the spec's schema before anything
trains."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from tbuild.builder import LoadedSpec, load_spec
from tbuild.builder.loader import Override, SpecError, Where, did_you_mean
from tbuild.builder.overlay import SEEDS, checked_seeds, load_overlay, seed_list
from tbuild.components.spec_base import StrictModel

NAME = r"^[A-Za-z0-9][A-Za-z0-9_.+=-]*$"  # the study's name is also a folder name
Real = float  # aliases: Param has fields named float and int
Floats = tuple[float, float]
Ints = tuple[int, int]


def higher_is_better(metric: str) -> bool:
    """Whether a higher ``metric`` is better, as the task offering it declares (``builder/spec/tasks.py``)."""
    from tbuild.builder.spec.tasks import declarations

    return next((d.metrics[metric] for d in declarations().values() if metric in d.metrics), True)


class Param(StrictModel):
    """One searched spec field: a float or int range, a list of choices, or the value another parameter
    took; ``when`` samples it only where other parameters took given values (else the base value stays)."""

    float: Floats | None = Field(None, description="[low, high]: a float between them.")
    int: Ints | None = Field(None, description="[low, high]: an integer between them (both included).")
    choice: list[Any] | None = Field(None, min_length=1, description="One of these values (any YAML values).")
    same_as: str | None = Field(None, description="The value the named parameter took (e.g. decoder layers = "
                                                  "encoder layers).")
    log: bool = Field(False, description="Sample the range on a log scale (float or int; low > 0).")
    step: Real | None = Field(None, gt=0, description="The range's step (int: an integer).")
    when: dict[str, list[Any]] = Field(default_factory=dict, description="{parameter: [values]}: sampled only "
                                       "where each named parameter took one of its values.")

    @model_validator(mode="after")
    def _one_kind(self) -> Param:
        kinds = [k for k in ("float", "int", "choice", "same_as") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(f"give exactly one of float, int, choice, same_as (got {', '.join(kinds) or 'none'})")
        bounds = self.float or self.int
        if bounds is not None and not bounds[0] < bounds[1]:
            raise ValueError(f"the range's low ({bounds[0]}) must be below its high ({bounds[1]})")
        if self.log and (bounds is None or bounds[0] <= 0):
            raise ValueError("log needs a float or int range with low > 0")
        if self.log and self.step is not None:
            raise ValueError("log and step exclude each other (Optuna samples one or the other)")
        if self.step is not None and (bounds is None or (self.int is not None and self.step != round(self.step))):
            raise ValueError("step needs a range (an integer step for an int range)")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in ("float", "int", "choice", "same_as") if getattr(self, k) is not None)

    def admits(self, value: Any) -> bool:
        """Whether ``value`` is a point of this parameter's range or choices."""
        if self.choice is not None:
            return value in self.choice
        bounds = self.float or self.int
        if bounds is None or isinstance(value, bool) or not isinstance(value, int | float):
            return False
        low, high = bounds
        on_step = self.step is None or abs((value - low) / self.step - round((value - low) / self.step)) < 1e-9
        return low <= value <= high and on_step and (self.float is not None or value == round(value))

    def corners(self) -> list[Any]:
        """The values to check against the schema before anything trains: both ends, or every choice."""
        if self.choice is not None:
            return list(self.choice)
        return list(self.float or self.int or ())

    def grid(self) -> list[Any]:
        """Every value of the parameter, for the grid sampler (a choice, or an int range)."""
        if self.choice is not None:
            return list(self.choice)
        if self.int is not None and not self.log:
            return list(range(self.int[0], self.int[1] + 1, int(self.step or 1)))
        raise ValueError("the grid sampler takes choices and int ranges only")


class Objective(StrictModel):
    """What a trial is scored by, on the validation split only."""

    metric: str = Field(
        "bleu", description="One of the base spec's task's metrics (as train.select.metric): bleu, bleu_lowercase, "
        "chrf, ppl (perplexity), f1 (EVALB, a parsing spec), accuracy (a tagger's or classifier's: an encoder_only "
        "model), rouge1, rouge2 or rouge_l (a summarizer's).")
    direction: Literal["maximize", "minimize"] | None = Field(None, description="Default: minimize ppl, maximize "
                                                                                 "the others.")
    weights: Literal["best", "average"] = Field("best", description="The weights a finished trial is scored with: "
                                                "best (best.safetensors) or average (its last train.average_last "
                                                "checkpoints, as the recipes decode).")
    lines: int | None = Field(500, ge=1, description="Validation lines decoded at each validation during training "
                              "(the values the pruner sees; train.select.lines); None: all.")
    beam: int = Field(1, ge=1, description="Beam of those validations (train.select.beam); the final score decodes "
                                           "as the spec's decode section says.")

    @property
    def maximize(self) -> bool:
        return self.direction == "maximize" if self.direction else higher_is_better(self.metric)


class Speed(StrictModel):
    """The second objective (minimized): the seconds a trial's trained model takes to decode validation
    sources on this machine, through the task's own decode (`tbuild decode`'s engine and the trial spec's
    decode section: beam, alpha, batch_tokens, precision, quantization), the median of ``repeats``."""

    lines: int | None = Field(None, ge=1, description="The first lines of the validation split that are timed "
                              "(None: all of it).")
    repeats: int = Field(3, ge=1, description="Timed decodes of those lines; the objective is their median.")
    threads: int | None = Field(None, ge=1, description="CPU threads while timing, as a user decodes (None: the "
                                "trials' own: the base's train.threads, else every core).")


class Budget(StrictModel):
    """How much the study and each trial may spend; the study stops at the first of trials and minutes."""

    trials: int | None = Field(None, ge=1, description="Finished trials (complete or pruned) in the study.")
    minutes: float | None = Field(None, gt=0, description="Training minutes over all the study's trials "
                                  "(every call and worker counted); no trial starts once they are spent.")
    trial_steps: int | None = Field(None, ge=1, description="Each trial's train.max_steps (the best spec keeps "
                                    "the base's budget).")
    trial_minutes: float | None = Field(None, gt=0, description="Each trial's train.max_minutes.")

    @model_validator(mode="after")
    def _a_stop(self) -> Budget:
        if self.trials is None and self.minutes is None:
            raise ValueError("give trials and/or minutes: the study needs a stop")
        return self


class Sampler(StrictModel):
    kind: Literal["tpe", "random", "grid", "nsga2"] = Field(
        "tpe", description="tpe (Optuna's default; with speed, its multi-objective form), random, grid, or nsga2 "
        "(NSGA-II: a genetic search of the Pareto front, for a speed objective).")
    seed: int | None = Field(1, description="The sampler's seed (None: random).")
    startup_trials: int = Field(5, ge=0, description="TPE: random trials before it models the space.")
    population: int = Field(20, ge=2, description="nsga2: trials per generation (the first generation is "
                            "random).")


class Pruner(StrictModel):
    kind: Literal["none", "median", "successive_halving", "hyperband", "threshold"] = Field(
        "median", description="none, median, successive_halving, hyperband, or threshold (prune a trial whose "
        "value is worse than `threshold`).")
    startup_trials: int = Field(3, ge=0, description="median: trials finished before it prunes.")
    warmup_steps: int = Field(0, ge=0, description="median, threshold: steps before a trial can be pruned.")
    min_steps: int | None = Field(None, ge=1, description="successive_halving, hyperband: the first rung's steps "
                                  "(default: train.validate_every).")
    reduction_factor: int = Field(3, ge=2, description="successive_halving, hyperband: η.")
    threshold: float | None = Field(None, description="threshold: the worst value a trial may report.")

    @model_validator(mode="after")
    def _threshold(self) -> Pruner:
        if (self.kind == "threshold") != (self.threshold is not None):
            raise ValueError("threshold goes with kind: threshold, and only with it")
        return self


class Storage(StrictModel):
    heartbeat_seconds: int = Field(60, ge=1, description="A running trial writes a heartbeat this often; one "
                                   "quiet for 2x as long (a worker killed) is marked failed.")
    retries: int = Field(1, ge=0, description="A failed trial (its worker killed) is tried again this many times "
                                              "(it resumes its run directory); 0: skipped.")


class StudySpec(StrictModel):
    """The study file."""

    base: str = Field(..., description="The spec every trial extends (relative to the study file).")
    name: str | None = Field(None, pattern=NAME, description="Default: the study file's stem.")
    output_dir: str | None = Field(None, description="Default: runs/tune/<name> (relative to the cwd).")
    set: dict[str, Any] = Field(default_factory=dict, description="Overrides of the base for every trial and for "
                                "the best spec: dotted.key: value.")
    space: dict[str, Param] = Field(..., min_length=1, description="dotted.key: how it is searched.")
    objective: Objective = Field(default_factory=Objective)
    budget: Budget
    sampler: Sampler = Field(default_factory=Sampler)
    speed: Speed | None = Field(None, description="A second objective: the trial's decode time on this machine "
                                "(minimized); the study then reports the Pareto front of the two.")
    pruner: Pruner | None = Field(None, description="Default: median; with speed, none (Optuna prunes one "
                                  "objective only; threshold is tbuild's own floor on the validation metric).")
    storage: Storage = Field(default_factory=Storage)
    baseline: bool = Field(True, description="The first trial takes the base spec's own values (those inside the "
                           "space), so that every other trial is compared with the spec it would replace.")
    seeds: int | list[int] | None = Field(None, description=SEEDS + " The pruner hears the first seed's run.")

    _seeds = field_validator("seeds")(checked_seeds)


@dataclass(frozen=True)
class Study:
    """A validated study file; ``shared``: its ``set`` overrides with their file positions."""

    path: Path
    spec: StudySpec
    base: Path
    shared: list[tuple[str, Where]]
    where: dict

    @property
    def name(self) -> str:
        return self.spec.name or self.path.stem

    @property
    def folder(self) -> Path:
        return Path(self.spec.output_dir) if self.spec.output_dir else Path("runs") / "tune" / self.name

    @property
    def pruner(self) -> Pruner:
        """The study file's pruner, else the default: median, or none for a two-objective study."""
        return self.spec.pruner or Pruner(kind="none" if self.spec.speed else "median")

    @property
    def directions(self) -> list[str]:
        """Optuna's directions: the validation metric's, then the decode time's (minimize) with ``speed``."""
        first = "maximize" if self.spec.objective.maximize else "minimize"
        return [first, "minimize"] if self.spec.speed else [first]

    def at(self, *key: Any) -> Where:
        return self.where.get(key, self.where[()])

    def load(self, params: dict[str, Any], extra: list[Override] | None = None) -> LoadedSpec:
        """The base spec with the shared overrides, ``params`` (each named by its line in the space) and ``extra``."""
        sets = [(f"{key}={json.dumps(value)}", self.at("space", key)) for key, value in params.items()]
        return load_spec(self.base, [*self.shared, *sets, *(extra or [])])

    @property
    def seeds(self) -> list[int] | None:
        """The train.seed of each run of a trial (``seeds: N``: 1 to N); None: one run, the base's seed."""
        return seed_list(self.spec.seeds)


def load_study(path: Path) -> Study:
    """Read and validate a study file; then every value of the space against the base spec's schema."""
    spec, where, base = load_overlay(path, StudySpec, "study", "base, space, objective, budget", _model_at)
    shared = [(f"{key}={json.dumps(value)}", where.get(("set", key), where[()])) for key, value in spec.set.items()]
    study = Study(path, spec, base, shared, where)
    _check_links(study)
    _check_speed(study)
    if spec.sampler.kind == "grid":
        for key, param in spec.space.items():
            try:
                if param.same_as is None:  # a tied parameter is not sampled
                    param.grid()
            except ValueError as e:
                raise SpecError(f"{study.at('space', key)}: space.{key}: {e}") from None
    _check_values(study)
    return study


def _check_links(study: Study) -> None:
    """``same_as`` and ``when`` name sampled parameters of the space."""
    space = study.spec.space
    errors = []
    for key, param in space.items():
        named = ([param.same_as] if param.same_as else []) + list(param.when)
        for other in named:
            if other not in space or space[other].same_as is not None or other == key:
                hint = did_you_mean(other, list(space))
                errors.append(f"{study.at('space', key)}: space.{key}: {other!r} is not another sampled parameter "
                              f"of the space{hint}")
    if errors:
        raise SpecError("\n".join(errors))


def _check_speed(study: Study) -> None:
    """A decode-time objective: a task whose decoding can be timed, and no pruner Optuna cannot run on
    two objectives (its pruners compare one value: median, successive halving, hyperband); a single
    objective: no sampler made for two (nsga2)."""
    spec = study.spec
    if spec.speed is None:
        if spec.sampler.kind == "nsga2":
            raise SpecError(f"{study.at('sampler', 'kind')}: sampler.kind: nsga2 searches two objectives; add a "
                            "speed section (the decode time) or choose tpe, random or grid")
        return
    from ..tasks.registry import task_of

    task = task_of(study.load({}).spec)
    if not task.times_decoding:
        raise SpecError(f"{study.at('speed')}: speed: a decode-time objective times a translator's (or parser's) "
                        f"decoding; the base spec is {task.what}")
    if study.pruner.kind not in ("none", "threshold"):
        raise SpecError(f"{study.at('pruner', 'kind')}: pruner.kind: {study.pruner.kind} compares one objective "
                        "and this study has two (speed): choose none, or threshold (a floor on the validation "
                        f"{spec.objective.metric} below which a trial stops)")


def _check_values(study: Study) -> None:
    """The base with the shared overrides and the objective's metric (as each trial selects on it: a
    tagger's accuracy, a translator's BLEU), then each parameter at each end or choice (the others at the
    base's values), validated as specs; every error of every value reported together."""
    errors: list[str] = []
    try:
        study.load({}, [(f"train.select.metric={study.spec.objective.metric}", study.at("objective", "metric"))])
    except SpecError as e:
        errors.extend(str(e).splitlines())
    for key, param in study.spec.space.items():
        for value in param.corners():
            try:
                study.load({key: value})
            except SpecError as e:
                errors.extend(f"{line} (space.{key} = {value!r})" for line in str(e).splitlines())
    if errors:
        raise SpecError("\n".join(dict.fromkeys(errors)))


def _model_at(loc: tuple) -> type[StrictModel]:
    """The model that holds the key at ``loc`` + (key,)."""
    if not loc:
        return StudySpec
    if loc[0] == "space":
        return Param
    fields = {"objective": Objective, "budget": Budget, "sampler": Sampler, "pruner": Pruner, "storage": Storage,
              "speed": Speed}
    return fields.get(str(loc[0]), StudySpec)
