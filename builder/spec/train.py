"""The spec's ``train`` section (§5): learning-rate schedules (a registry), Adam, distributed training, the start from
a trained model (``init``), adapters and the validation metric.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from tbuild.components.registry import Registry
from tbuild.components.spec_base import StrictModel

from .base import FieldError

SCHEDULES = Registry("schedule", plugins=False)


class ScheduleSpec(StrictModel):
    """Base of the learning-rate schedules (§5.3); ``kind`` names one."""

    kind: str
    warmup: int = Field(4000, ge=0, description="warmup_steps (§5.3: 4000).")

    def rate(self, step: int, d_model: int) -> float:
        """The learning rate for update ``step`` (1-based)."""
        raise NotImplementedError(f"{type(self).__name__} must define rate")


@SCHEDULES.declare
class NoamSchedule(ScheduleSpec):
    """§5.3 Eq. 3: factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)."""

    kind: Literal["noam"] = "noam"
    factor: float = Field(1.0, gt=0, description="Multiplies Eq. 3.")

    def rate(self, step: int, d_model: int) -> float:
        step = max(step, 1)
        # lrate = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)  (§5.3, Eq. 3)
        return self.factor * d_model**-0.5 * min(step**-0.5, step * max(self.warmup, 1) ** -1.5)


@SCHEDULES.declare
class InverseSqrtSchedule(ScheduleSpec):
    """Linear warmup to lr, then lr · sqrt(warmup / step): Eq. 3's shape (§5.3) with a chosen peak."""

    kind: Literal["inverse_sqrt"] = "inverse_sqrt"
    lr: float = Field(5e-4, gt=0, description="The peak learning rate (reached at step warmup).")

    def rate(self, step: int, d_model: int) -> float:
        step = max(step, 1)
        return self.lr * (step / self.warmup if step < self.warmup else (max(self.warmup, 1) / step) ** 0.5)


@SCHEDULES.declare
class ConstantSchedule(ScheduleSpec):
    """Linear warmup to lr, then constant."""

    kind: Literal["constant"] = "constant"
    lr: float = Field(5e-4, gt=0, description="The learning rate after warmup.")

    def rate(self, step: int, d_model: int) -> float:
        step = max(step, 1)
        return self.lr * (min(1.0, step / self.warmup) if self.warmup else 1.0)


ScheduleKind = SCHEDULES.field(ScheduleSpec)


class OptimizerSpec(StrictModel):
    """Adam (§5.3): β1 = 0.9, β2 = 0.98, ε = 1e-9."""

    betas: tuple[float, float] = Field((0.9, 0.98), description="Adam β1, β2 (§5.3).")
    eps: float = Field(1e-9, gt=0, description="Adam ε (§5.3).")
    weight_decay: float = Field(0.0, ge=0, description="Decoupled weight decay (AdamW); 0 as the paper.")


class DistributedSpec(StrictModel):
    """How several training processes (torchrun, `tbuild train --nproc N`) share the model."""

    strategy: Literal["ddp", "fsdp"] = Field(
        "ddp", description="ddp: every process holds the whole model, gradients are all-reduced; fsdp: FSDP2 "
        "shards parameters, gradients and optimizer state over the processes."
    )


class InitSpec(StrictModel):
    """Start a new run from a trained model's weights (fine-tuning): what is loaded, how the vocabulary
    is matched, what stays frozen and what starts fresh. Shown as a load plan before the first step."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    source: str = Field(..., alias="from", description="A run directory, a spec (its run directory) or a "
                        "checkpoint file, relative to the working directory (as output_dir is); of this "
                        "model.kind or another that shares a stack with it (an encoder-decoder's encoder for an "
                        "encoder_only model, its decoder for a decoder_only one), loaded by name.")
    average: int | None = Field(None, ge=0, description="Start from the average of the source's newest K "
                                "checkpoints (0: its train.average_last); None: its best, else newest, weights.")
    include: list[str] = Field(["*"], description="Parameter-name patterns (fnmatch) to load.")
    exclude: list[str] = Field([], description="Parameter-name patterns not to load (they start as the spec's "
                               "initialisation), e.g. ['output.*'].")
    vocab: Literal["refuse", "remap", "extend"] = Field(
        "refuse", description="refuse: the two tokenizers must be the same file (sha256); a run that names no "
        "tokenizer takes the source's. remap: the run trains (or names) its own tokenizer, and embedding and "
        "output rows are copied by piece string; pieces the source lacks start as the spec's init. extend: the "
        "source's tokenizer is kept and the pieces of one trained on this run's data that it lacks are appended "
        "(every source piece keeps its id and row; the new ones start as the spec's init).")
    freeze: list[str] = Field([], description="Parts that get no gradient and no optimizer state: embeddings "
                              "(with a vocabulary-sized output, not a tagger's or classifier's head), "
                              "encoder, decoder, encoder.layers.I or I-J, decoder.layers.I or I-J, "
                              "encoder.norm, decoder.norm.")
    reset: list[Literal["optimizer", "schedule"]] = Field(
        ["optimizer", "schedule"], description="What starts fresh, as in a new run: optimizer (Adam's moment "
        "estimates; otherwise the source's, for the tensors loaded unchanged) and schedule (the learning-rate "
        "step; otherwise the schedule goes on from the source's step).")
    copy_: dict[str, str] = Field({}, alias="copy", description="Initialise parameters the source lacks from "
                                  "named ones it has, by prefix, e.g. {decoder.layers.6: decoder.layers.5} to "
                                  "deepen a model.")


class AdaptersSpec(StrictModel):
    """Low-rank adapters (LoRA, Hu et al. 2021) trained on a frozen base (``train.init``): each targeted
    linear map W becomes W + (alpha/r) · B A, A and B of rank r, B starting at zero (§4.1)."""

    kind: Literal["lora"] = Field("lora", description="The adapter kind (lora: Hu et al. 2021).")
    r: int = Field(8, ge=1, description="Rank of the update B A (§4.1).")
    alpha: float = Field(16.0, gt=0, description="Scale α; the update is multiplied by alpha/r (§4.1).")
    dropout: float = Field(0.05, ge=0, lt=1, description="Dropout on the adapters' input.")
    targets: list[str] = Field(
        ["attention"], min_length=1, description="The linear modules adapted: groups (attention: every "
        "projection of the attention blocks; ffn: the feed-forward blocks') or module-name patterns "
        "(fnmatch), e.g. encoder.*.self_attn.sublayer.w_q or '*.w_v'; a target that matches nothing is refused.")


class SelectSpec(StrictModel):
    """How validation scores the model, picks best.safetensors and stops training early. The paper
    selects nothing on a metric (§6.1 averages the last checkpoints); this is the usual practice."""

    metric: str = Field(
        "ppl", description="The score that picks best.safetensors, one of the run's task's metrics (its "
        "declaration's: builder/spec/tasks.py): ppl (validation perplexity, lower is better), bleu, bleu_lowercase "
        "or chrf (sacreBLEU on the decoded validation sources), f1 (EVALB F1 of the decoded trees; parsing only), "
        "or accuracy (the share of words tagged right, or of lines classified right; a tagger or classifier "
        "only); all but ppl: higher is better."
    )
    lines: int | None = Field(None, ge=1, description="Decode only the first N validation lines for the metric "
                              "(None: all).")
    beam: int = Field(1, ge=1, description="Beam size of the validation decoding (1: greedy); length penalty and "
                      "maximum length come from the decode section.")
    patience: int | None = Field(None, ge=1, description="Stop training after this many validations in a row "
                                 "without a better score (early stopping; equal is not better); None: never.")


class TrainSpec(StrictModel):
    """Training (§5). Defaults are the paper's base-model settings."""

    seed: int = Field(1, description="Seed for initialisation, shuffling and dropout.")
    batch_tokens: int = Field(
        25000, ge=1, description="Tokens per batch on each side (§5.1: ~25000 source + 25000 target)."
    )
    update_freq: int = Field(
        1, ge=1, description="Batches per update, over all processes: each of N processes accumulates "
        "update_freq / N of them (a multiple of N), so a spec means the same update on any number of processes."
    )
    optimizer: OptimizerSpec = Field(default_factory=OptimizerSpec, description="Adam settings (§5.3).")
    schedule: ScheduleKind = Field(default_factory=NoamSchedule, description="Learning-rate schedule (§5.3).")
    label_smoothing: float = Field(0.1, ge=0, lt=1, description="ε_ls (§5.4: 0.1).")
    rdrop: float = Field(0.0, ge=0, description="R-Drop's α (Liang et al. 2021): each batch goes through the model "
                         "twice, with two dropout masks, and α times the two output distributions' symmetric KL "
                         "divergence joins their averaged loss (0: off). Twice a step's compute; needs dropout.")
    clip_norm: float | None = Field(None, gt=0, description="Clip the gradient norm (None: no clipping).")
    max_steps: int | None = Field(100000, ge=1, description="Stop after this many updates (§5.2: 100k base).")
    max_epochs: int | None = Field(None, ge=1, description="Stop after this many epochs.")
    max_minutes: float | None = Field(None, gt=0, description="Stop after this much wall time.")
    validate_every: int = Field(1000, ge=1, description="Validate every N steps (and at the end).")
    log_every: int = Field(100, ge=1, description="Log metrics every N steps.")
    checkpoint_every: int | None = Field(None, ge=1, description="Checkpoint every N steps.")
    checkpoint_minutes: float | None = Field(10.0, gt=0, description="Checkpoint every M minutes (§6.1: 10).")
    keep_last: int = Field(5, ge=1, description="Keep the last K checkpoints.")
    average_last: int = Field(5, ge=1, description="Checkpoints averaged by `tbuild average` and `--average` (§6.1: "
                              "5 base, 20 big); at most keep_last.")
    precision: Literal["auto", "fp32", "bf16", "fp16"] = Field(
        "auto", description="auto: bf16 autocast on a CUDA GPU that has it, fp16 with a gradient scaler on one "
        "that does not (V100, T4); on a CPU bf16 autocast only where a short probe (cached per machine) measures "
        "bf16 matmuls at the model's widths at least 1.2x as fast as fp32, else fp32. bf16: autocast on CPU too "
        "(with a warning where it measures slower); fp16: CUDA only."
    )
    distributed: DistributedSpec = Field(
        default_factory=DistributedSpec, description="Training on several processes (torchrun, --nproc)."
    )
    threads: int | None = Field(None, ge=1, description="CPU threads (None: all cores).")
    log: list[str] = Field(
        ["jsonl"], description="Where training metrics go: jsonl (metrics.jsonl, valid.jsonl; always on), "
        "tensorboard (RUN/tensorboard), mlflow (RUN/mlruns or $MLFLOW_TRACKING_URI), or a plugin's logger.",
    )
    pad_multiple: int | None = Field(
        None, ge=1, description="Pad each batch's source and target length up to a multiple of this, so few "
        "distinct shapes occur (GPU kernels are planned per shape); None: 8 on CUDA, 1 on CPU.",
    )
    init: InitSpec | None = Field(None, description="Start from a trained model's weights (fine-tuning); "
                                  "None: the spec's initialisation.")
    row_steps: int | None = Field(
        None, ge=0, description="Round each batch's row count up to one of this many sizes per doubling (a power "
        "of two; extra rows carry no loss); 0: exact; None: 8 on CUDA with CUDA graphs (train.compile), else 0.",
    )
    compile: bool | Literal["auto"] = Field(
        "auto", description="torch.compile the model (graphs traced with symbolic shapes, shared by the "
        "bucketed batch shapes). auto: on CUDA for runs of 2,000 steps or more (with CUDA graphs for a model "
        "too small to keep the GPU busy), never on a CPU; true/false: always/never.",
    )
    packing: bool = Field(
        False, description="Pack several pairs end to end into each row (rows as long as the longest pair, "
        "batch_tokens / that many rows), attention kept within each pair and positions counted from 0 in each: "
        "every batch one shape, nearly every computed token a real one. An encoder-decoder without a pointer.",
    )
    select: SelectSpec = Field(
        default_factory=SelectSpec, description="The validation metric that picks best.safetensors, and early "
        "stopping on it (default: perplexity, no early stop).",
    )
    adapters: AdaptersSpec | None = Field(
        None, description="Train low-rank adapters (LoRA) on the frozen model of train.init instead of the "
        "model's own weights; the run saves the adapters only. None: train the weights.",
    )

    @model_validator(mode="after")
    def _row_steps_power_of_two(self) -> TrainSpec:
        if self.row_steps and self.row_steps & (self.row_steps - 1):
            raise FieldError(("row_steps",), f"row_steps ({self.row_steps}) must be 0 or a power of two")
        return self

    @model_validator(mode="after")
    def _adapters_need_a_base(self) -> TrainSpec:
        if self.adapters is not None and self.init is None:
            raise FieldError(("adapters",), "adapters train on a trained model: set train.init.from to its run")
        if self.adapters is not None and self.init is not None and self.init.vocab != "refuse":
            raise FieldError(("adapters",), f"adapters train on the base's vocabulary unchanged: train.init.vocab "
                             f"{self.init.vocab} changes its rows (use vocab: refuse)")
        if self.adapters is not None and self.distributed.strategy == "fsdp":
            raise FieldError(("adapters",), "adapters train with distributed.strategy ddp (fsdp shards the "
                             "whole model; the adapters are small)")
        return self

    @property
    def averaged(self) -> int:
        """How many checkpoints `--average` alone and `tbuild average` average: ``average_last``, at most the
        ``keep_last`` the run keeps (a tagger keeping 3 averages 3)."""
        return min(self.average_last, self.keep_last)
