"""Specs of the attention blocks (``tbuild.components.attention``), with their cross-field checks
and attention FLOPs. Legend: n context length (keys), h heads, d_k/d_v per-head sizes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal

from pydantic import Field

from ..registry import ATTENTION
from ..spec_base import ComponentSpec, LateFields, Use


def dot_product_flops(n: int, use: Use) -> int:
    """2·n·h·(d_k + d_v): QKᵀ and the weighted sum of V over n keys, per query (§3.2.1). Also the
    figure for a plugin's attention kind that does not say."""
    return 2 * n * use.heads * (use.d_k + use.d_v)


class AttentionSpecBase(ComponentSpec):
    """Base of the attention specs: FLOPs of the attention itself (the Q/K/V/output projections are
    counted with the other matrix products). Default: dot-product attention over all n keys."""

    flops_formula: ClassVar[str] = "2·n·h·(d_k + d_v): QKᵀ and the weighted sum of V (§3.2.1)"

    def flops_per_query(self, n: int, use: Use) -> int:
        """Forward FLOPs of one query token attending to a context of n keys."""
        return dot_product_flops(n, use)


def _check_kv_heads(kv_heads: int | None, uses: Sequence[Use]) -> None:
    for use in uses:
        if kv_heads is not None and use.heads % kv_heads:
            raise ValueError(f"kv_heads ({kv_heads}) must divide {use.stack}.heads ({use.heads})")


def _refuse_cross(kind: str, uses: Sequence[Use]) -> None:
    if any(use.role == "cross" for use in uses):
        raise ValueError(f"{kind} attention is self-attention only: use it in model.attention or a "
                         f"stack's attention, and e.g. multihead for cross_attention")


@ATTENTION.declare
class MultiHeadSpec(AttentionSpecBase, LateFields):
    """Multi-head scaled dot-product attention (§3.2.1 Eq. 1, §3.2.2); kv_heads < heads shares
    each key/value head among heads/kv_heads query heads (grouped-query; 1 = multi-query)."""

    kind: Literal["multihead"] = "multihead"
    late: ClassVar[tuple[str, ...]] = ("scaled",)
    bias: bool = Field(True, description="Biases on the Q/K/V/output projections (as the authors' code).")
    kv_heads: int | None = Field(None, gt=0, description="Key/value heads, dividing heads. Default: heads.")
    scaled: bool = Field(True, description="Scores divided by √d_k (§3.2.1); false: T5's unscaled q·k (Raffel et "
                         "al. 2020 fold the scale into W^Q's initialisation).")

    def check(self, uses: Sequence[Use]) -> None:
        _check_kv_heads(self.kv_heads, uses)


@ATTENTION.declare
class LocalSpec(AttentionSpecBase):
    """Restricted self-attention (§4, Table 1 last row): multi-head attention in which position i
    sees only keys j with |i-j| ≤ r (encoder), or i-r ≤ j ≤ i (decoder, causal). Positions are
    absolute, so cached incremental decoding sees the same window (the cache still keeps every key).
    Self-attention only: refused as cross-attention, since source and target positions are not
    aligned and a window over memory positions could leave a target position nothing to attend to."""

    kind: Literal["local"] = "local"
    window: int = Field(4, ge=1, description="r: keys at most this many positions away are attended to (§4).")
    bias: bool = Field(True, description="Biases on the Q/K/V/output projections.")
    kv_heads: int | None = Field(None, gt=0, description="Key/value heads, dividing heads. Default: heads.")

    flops_formula: ClassVar[str] = ("2·w·h·(d_k + d_v), w = min(n, 2r+1) keys in the window "
                                    "(min(n, r+1) causal) (§4, Table 1: O(r·n·d))")

    def check(self, uses: Sequence[Use]) -> None:
        _refuse_cross(self.kind, uses)
        _check_kv_heads(self.kv_heads, uses)

    def flops_per_query(self, n: int, use: Use) -> int:
        window = min(n, self.window + 1 if use.causal else 2 * self.window + 1)
        return 2 * window * use.heads * (use.d_k + use.d_v)


@ATTENTION.declare
class AdditiveSpec(AttentionSpecBase):
    """Additive attention (Bahdanau et al. 2015), the alternative §3.2.1 compares against: per head
    h, score_ij = v_hᵀ tanh(W^Q_h x_i + W^K_h x_j) (a one-hidden-layer feed-forward compatibility
    function of width d_k, no 1/√d_k scaling), softmax over j, weighted sum of the values x_j W^V_h.
    Adds v_h ∈ R^{d_k} per head (H·d_k parameters). It materialises a (B, H, T, S, d_k) hidden
    layer, so memory grows with T·S·d_k: the "space-efficient" point of §3.2.1."""

    kind: Literal["additive"] = "additive"
    bias: bool = Field(True, description="Biases on the Q/K/V/output projections (Q/K: the hidden bias).")

    flops_formula: ClassVar[str] = ("n·h·(4·d_k + 2·d_v): per key and head, the hidden layer's d_k adds and "
                                    "d_k tanh, the v_h dot 2·d_k, the weighted sum of V 2·d_v")

    def flops_per_query(self, n: int, use: Use) -> int:
        hidden = 2 * n * use.d_k  # q_i + k_j, then tanh: d_k each per key
        score = 2 * n * use.d_k  # v_hᵀ tanh(...)
        mix = 2 * n * use.d_v  # Σ_j α_ij v_j
        return use.heads * (hidden + score + mix)


@ATTENTION.declare
class RelativeSpec(AttentionSpecBase):
    """Relative position representations (Shaw et al. 2018): learned a^K_ij = w^K_clip(j-i, k) and
    a^V_ij = w^V_clip(j-i, k), shared across heads (their §3.3), enter as
    e_ij = (x_i W^Q)(x_j W^K + a^K_ij)ᵀ/√d_z and z_i = Σ_j α_ij (x_j W^V + a^V_ij).
    Encoder tables hold 2k+1 rows (distances -k..k), causal decoder tables k+1 (-k..0; later keys
    are masked), so a layer adds (2k+1)·(d_k+d_v) or (k+1)·(d_k+d_v) parameters. Distances use
    absolute positions, so cached incremental decoding agrees with the full pass. Self-attention
    only (as Shaw et al.): refused as cross-attention, where target-source distances mean nothing."""

    kind: Literal["relative"] = "relative"
    max_distance: int = Field(16, ge=1, description="k: distances j-i clip to [-k, k] (Shaw et al.: 16).")
    bias: bool = Field(True, description="Biases on the Q/K/V/output projections.")

    flops_formula: ClassVar[str] = ("2·(n + R)·h·(d_k + d_v), R = 2k+1 buckets (k+1 causal): content "
                                    "q·kᵀ and q·w^Kᵀ over the buckets, the weighted sums of V and of w^V")

    def check(self, uses: Sequence[Use]) -> None:
        _refuse_cross(self.kind, uses)

    def buckets(self, causal: bool) -> int:
        """R, the rows of the relative tables: distances -k..k, or -k..0 when causal."""
        return self.max_distance + 1 if causal else 2 * self.max_distance + 1

    def flops_per_query(self, n: int, use: Use) -> int:
        r = self.buckets(use.causal)
        content = 2 * n * use.d_k + 2 * n * use.d_v  # q·k_jᵀ, Σ_j α_ij v_j
        relative = 2 * r * use.d_k + 2 * r * use.d_v  # q·w^Kᵀ per bucket, bucket sums · w^V
        return use.heads * (content + relative)
