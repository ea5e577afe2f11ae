"""The spec's ``decode`` section (§6.1): beam search, sampling, output lengths, and named profiles."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tbuild.components.spec_base import StrictModel

from .base import FieldError

PATIENCE = 2.0  # stopping patience's factor: on Multi30k's validation set, exact's outputs at 1.37× its speed


class DecodeSpec(StrictModel):
    """Decoding (§6.1): beam 4, length penalty α 0.6, max output length input + 50."""

    beam: int = Field(4, ge=1, description="Beam size k (§6.1: 4); 1 is greedy.")
    alpha: float = Field(0.6, ge=0, description="Length penalty α of Wu et al. 2016 (§6.1: 0.6).")
    max_len_a: float = Field(1.0, ge=0, description="Max output length = a · source length + b (§6.1: a=1).")
    max_len_b: int = Field(50, ge=0, description="Max output length = a · source length + b (§6.1: b=50).")
    nbest: int = Field(1, ge=1, description="Hypotheses printed per sentence.")
    stopping: Literal["exact", "beam", "patience"] = Field(
        "exact", description="When a sentence's search stops: exact (once no live beam can still enter its n-best: "
        "the outputs of a search run to the maximum length), beam (once beam hypotheses have finished, as fairseq, "
        "CTranslate2 and Hugging Face's early_stopping do: fewer steps) or patience (once patience × beam have "
        "finished, Kasai et al. 2022); beam and patience also stop where exact would (docs/decoding.md).")
    patience: float = Field(PATIENCE, ge=1, description="With stopping: patience, the finished hypotheses that stop a "
                            "sentence, as a multiple of the beam (1 is stopping: beam).")
    batch_tokens: int = Field(4000, ge=1, description="Source tokens per decoding batch.")
    precision: Literal["auto", "fp32", "bf16"] = Field(
        "auto", description="auto: bf16 autocast on CUDA; on a CPU, bf16 products where the run's decoding check "
        "measured them faster at the same valid BLEU (RUN/decode_precision.json), else fp32. bf16: bf16 products on "
        "a CPU too (with a warning where they measure slower than fp32). --precision overrides it."
    )
    quantization: Literal["float32", "int8"] = Field(
        "float32", description="Weights of the linear layers when decoding: int8 (CPU only; natively prepacked int8 "
        "linears, the output projection too where the run's decoding check holds it; int8 weights in CTranslate2). "
        "--quantization overrides it."
    )

    sampling: Literal["topk", "topp", "temperature"] | None = Field(
        None, description="Sample instead of beam search: topk (from the topk best tokens), topp (from the "
        "smallest set of best tokens holding topp of the mass) or temperature (from all tokens); nbest samples.")
    topk: int = Field(10, ge=1, description="Tokens kept by sampling topk.")
    topp: float = Field(0.9, gt=0, le=1, description="Probability mass kept by sampling topp.")
    temperature: float = Field(1.0, ge=0, description="Sampling temperature (0: always the most probable token).")
    seed: int = Field(0, ge=0, description="Random seed of sampling: the same seed gives the same outputs.")
    no_repeat_ngram: int = Field(0, ge=0, description="No n-gram of this size twice in an output (0: off).")
    profiles: dict[str, DecodeProfile] = Field(
        default_factory=dict, description="Named sets of these settings, chosen with --profile NAME.")

    @model_validator(mode="after")
    def _nbest_within_beam(self) -> DecodeSpec:
        if self.sampling is None and self.nbest > self.beam:
            raise FieldError(("nbest",), f"nbest ({self.nbest}) cannot exceed beam ({self.beam})")
        return self

    def with_profile(self, name: str | None) -> DecodeSpec:
        """These settings with profile ``name``'s on top (None: as they are); KeyError if there is none."""
        if name is None:
            return self
        if name not in self.profiles:
            raise KeyError(name)
        fields = self.model_dump(exclude={"profiles"}) | self.profiles[name].model_dump(exclude_none=True)
        return DecodeSpec.model_validate(fields)


class DecodeProfile(StrictModel):
    """A named set of decoding settings (any field of ``decode`` but profiles); unset fields keep
    the decode section's value (so a profile cannot set a field to null)."""

    beam: int | None = Field(None, ge=1)
    alpha: float | None = Field(None, ge=0)
    max_len_a: float | None = Field(None, ge=0)
    max_len_b: int | None = Field(None, ge=0)
    nbest: int | None = Field(None, ge=1)
    stopping: Literal["exact", "beam", "patience"] | None = None
    patience: float | None = Field(None, ge=1)
    batch_tokens: int | None = Field(None, ge=1)
    precision: Literal["auto", "fp32", "bf16"] | None = None
    quantization: Literal["float32", "int8"] | None = None
    sampling: Literal["topk", "topp", "temperature"] | None = None
    topk: int | None = Field(None, ge=1)
    topp: float | None = Field(None, gt=0, le=1)
    temperature: float | None = Field(None, ge=0)
    seed: int | None = Field(None, ge=0)
    no_repeat_ngram: int | None = Field(None, ge=0)
