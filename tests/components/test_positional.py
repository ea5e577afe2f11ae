"""Positional schemes against their definitions: sinusoidal (§3.5), learned, rope, alibi, none."""

from __future__ import annotations

import math

import pytest
import torch

from tbuild.builder import SpecError, load_spec
from tbuild.components.attention import MultiHeadAttention, MultiHeadSpec
from tbuild.components.positional import (
    ALiBi,
    ALiBiSpec,
    Learned,
    LearnedSpec,
    NoPosition,
    NoPositionSpec,
    Rotary,
    RotarySpec,
    Sinusoidal,
    SinusoidalSpec,
    sinusoid_table,
)

from ..conftest import tiny_model
from .reference import D, H, by_hand, close, incremental, init


def test_sinusoid_table_matches_section_3_5() -> None:
    d_model, length = 10, 50
    table = sinusoid_table(length, d_model)
    for pos in range(length):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert math.isclose(table[pos, 2 * i].item(), math.sin(angle), abs_tol=1e-6)
            assert math.isclose(table[pos, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-6)


def test_sinusoidal_adds_table_at_offset_and_extends() -> None:
    pe = Sinusoidal(SinusoidalSpec(), d_model=6, max_positions=4)
    x = torch.zeros(1, 3, 6)
    torch.testing.assert_close(pe(x, offset=5), sinusoid_table(8, 6)[5:8][None])  # past the table of 4


def test_sinusoidal_past_its_table_computes_rows_without_storing_them() -> None:
    pe = Sinusoidal(SinusoidalSpec(), d_model=6, max_positions=None)
    table = pe.table
    assert table.shape == (1024, 6)  # default length when max_positions is unset
    out = pe(torch.zeros(1, 1500, 6))
    assert pe.table is table and pe.table.shape == (1024, 6)  # forward changed no state
    pos = torch.arange(1500, dtype=torch.float64)[:, None]
    angle = pos / 10000 ** (torch.arange(0, 6, 2, dtype=torch.float64) / 6)  # pos / 10000^(2i/d_model) (§3.5)
    expected = torch.stack([angle.sin(), angle.cos()], -1).flatten(1)  # sin at 2i, cos at 2i+1
    torch.testing.assert_close(out[0], expected.float())


def test_learned_table_shape_and_limit() -> None:
    pe = Learned(LearnedSpec(), d_model=6, max_positions=9)
    assert pe.embedding.weight.shape == (9, 6)
    assert pe(torch.zeros(2, 9, 6)).shape == (2, 9, 6)
    try:
        pe(torch.zeros(1, 10, 6))
    except ValueError as e:
        assert "max_positions" in str(e)
    else:
        raise AssertionError("10 positions should exceed max_positions 9")


def test_learned_positions_need_max_positions() -> None:
    with pytest.raises(SpecError, match="model.positional: learned positions need model.max_positions"):
        load_spec({"model": {"positional": {"kind": "learned"}}})


def test_rope_rotates_2d_pairs_by_position_times_theta() -> None:
    rope = Rotary(RotarySpec(base=100.0), d_model=4, max_positions=None)
    # 2-d: θ_0 = 1, so position m rotates (1, 0) to (cos m, sin m)
    e = torch.tensor([[[[1.0, 0.0]]]])  # (B, H, T=1, 2)
    for m in range(4):
        expected = torch.tensor([[[[math.cos(m), math.sin(m)]]]], dtype=torch.float64)
        close(rope.rotate(e.double(), offset=m), expected)
    # 4-d: pairs (0, 1) and (2, 3) rotate by m·1 and m·100^(-2/4) = m·0.1
    t = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    m = 3
    expected = []
    for (a, b), theta in (((1.0, 2.0), 1.0), ((3.0, 4.0), 0.1)):
        c, s = math.cos(m * theta), math.sin(m * theta)
        expected += [c * a - s * b, s * a + c * b]
    close(rope.rotate(t.view(1, 1, 1, 4), offset=m).flatten(), torch.tensor(expected, dtype=torch.float64))


def test_rope_preserves_norms_and_dot_products_depend_on_offset_only() -> None:
    rope = Rotary(RotarySpec(), d_model=8, max_positions=None)
    x = torch.randn(2, 3, 7, 8, dtype=torch.float64)  # (B, H, T, d_k)
    torch.testing.assert_close(rope.rotate(x, offset=5).norm(dim=-1), x.norm(dim=-1))
    q, k = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)

    def dot(m: int, n: int) -> torch.Tensor:
        return rope.rotate(q.view(1, 1, 1, 8), m).flatten() @ rope.rotate(k.view(1, 1, 1, 8), n).flatten()

    for m, n in ((0, 3), (2, 0), (4, 4)):
        for shift in (1, 7, 50):
            torch.testing.assert_close(dot(m, n), dot(m + shift, n + shift))
    assert not torch.allclose(dot(0, 3), dot(0, 4))


def test_rope_inside_attention_cached_equals_full() -> None:
    att = init(MultiHeadAttention(MultiHeadSpec(), d_model=D, heads=H, d_k=4, d_v=4, dropout=0.0,
                                   causal=True))
    rope = Rotary(RotarySpec(), d_model=D, max_positions=None)
    x = torch.randn(2, 5, D, dtype=torch.float64)
    close(incremental(att, x, rope), att(x, positional=rope))


def test_alibi_bias_is_minus_slope_times_distance() -> None:
    alibi = ALiBi(ALiBiSpec(), d_model=D, max_positions=None)
    torch.testing.assert_close(ALiBi.slopes(8), torch.tensor([2.0**-h for h in range(1, 9)]))  # 1/2..1/256
    torch.testing.assert_close(ALiBi.slopes(4), torch.tensor([2.0 ** (-8 * h / 4) for h in range(1, 5)]))
    bias = alibi.attn_bias(4, 2, 5, offset=3)  # queries at positions 3, 4; keys 0..4
    for h in range(4):
        m = 2.0 ** (-8 * (h + 1) / 4)
        for i in range(2):
            for j in range(5):
                assert math.isclose(bias[h, i, j].item(), -m * abs(i + 3 - j), abs_tol=1e-6)
    # the encoder sees the symmetric distance |i-j|
    full = alibi.attn_bias(2, 4, 4)
    torch.testing.assert_close(full, full.transpose(-2, -1))


def test_alibi_in_attention_equals_biased_eq1() -> None:
    att = init(MultiHeadAttention(MultiHeadSpec(), d_model=D, heads=H, d_k=3, d_v=5, dropout=0.0,
                                   causal=True))
    alibi = ALiBi(ALiBiSpec(), d_model=D, max_positions=None)
    x = torch.randn(2, 5, D, dtype=torch.float64)
    m = ALiBi.slopes(H).double()
    hand, _ = by_hand(att, x, x, torch.ones(5, 5, dtype=torch.bool).tril().expand(2, 5, 5),
                       lambda h, i, j, q, k: q @ k / math.sqrt(3) - m[h] * abs(i - j))
    close(att(x, positional=alibi), hand)
    close(incremental(att, x, alibi), hand)


def test_no_positions_make_the_encoder_permutation_equivariant() -> None:
    none = NoPosition(NoPositionSpec(), d_model=4, max_positions=None)
    x = torch.randn(1, 3, 4)
    assert none(x, 5) is x and none.rotate(x, 2) is x and none.attn_bias(2, 3, 3) is None
    model = tiny_model(["model.positional.kind=none"])
    src = torch.tensor([[5, 6, 7, 8]])
    perm = torch.tensor([2, 0, 3, 1])
    memory, _ = model.encode(src)
    permuted, _ = model.encode(src[:, perm])
    torch.testing.assert_close(permuted, memory[:, perm], atol=1e-5, rtol=1e-5)


def test_llama3_scaling_keeps_divides_and_interpolates_by_wavelength() -> None:
    """Llama 3.1's rule by hand on three θ_i, one per region (L = 64: wavelengths below 16 kept, above 64 divided
    by the factor, between interpolated), and transformers' own table where it is installed."""
    from tbuild.components.positional import llama3_frequencies
    from tbuild.components.specs.positional import RopeScalingSpec

    s = RopeScalingSpec(factor=8.0, original_max_positions=64)
    theta = torch.tensor([2 * math.pi / 8, 2 * math.pi / 32, 2 * math.pi / 128], dtype=torch.float64)
    smooth = (64 / 32 - 1.0) / (4.0 - 1.0)
    expected = torch.stack([theta[0], (1 - smooth) * theta[1] / 8 + smooth * theta[1], theta[2] / 8])
    torch.testing.assert_close(llama3_frequencies(theta, s), expected)
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = transformers.LlamaConfig(hidden_size=64, num_attention_heads=1, head_dim=64, rope_parameters={
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
    theirs, _ = ROPE_INIT_FUNCTIONS["llama3"](config, "cpu")
    theta = 500000.0 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64)
    ours = llama3_frequencies(theta, RopeScalingSpec(factor=8.0))
    assert (ours - theirs.double()).abs().max().item() < 1e-6


# ----------------------------------------------------------------------------- bucketed (T5's relative bias)

T5_LAYERS = ["model.positional={kind: bucketed, buckets: 8, max_distance: 20}", "model.norm={kind: rmsnorm}",
             "model.norm_placement=pre", "model.scale_embeddings=false", "model.ffn={kind: geglu}",
             "model.attention={kind: multihead, bias: false, scaled: false}",
             "model.cross_attention={kind: multihead, bias: false, scaled: false}"]


@pytest.mark.parametrize(("causal", "distance", "bucket"), [
    # bidirectional, 8 buckets: 4 per direction, distances 0 and 1 exact, then 2 + ⌊log(d/2)/log(20/2)·2⌋ up to 3
    (False, 0, 0), (False, -1, 1), (False, -2, 2), (False, -5, 2), (False, -7, 3), (False, -100, 3),
    (False, 1, 5), (False, 4, 6), (False, 7, 7), (False, 100, 7),
    # causal, 8 buckets by i - j: 0..3 exact, then 4 + ⌊log(d/4)/log(20/4)·4⌋ up to 7; later keys: 0
    (True, 0, 0), (True, -3, 3), (True, -5, 4), (True, -10, 6), (True, -19, 7), (True, -1000, 7), (True, 5, 0),
])
def test_bucket_of_a_distance_by_hand(causal: bool, distance: int, bucket: int) -> None:
    """Raffel et al. 2020, §2.1: exact buckets for short distances, logarithmic ones up to max_distance; the
    encoder's split by direction (keys after the query in the upper half), the decoder's by how far back."""
    from tbuild.components.positional import relative_bucket

    found = relative_bucket(torch.tensor([distance]), causal=causal, buckets=8, max_distance=20)
    assert found.item() == bucket


def test_bucketed_bias_is_each_head_s_table_row_of_the_bucket() -> None:
    from tbuild.components.positional import Bucketed, BucketedSpec, relative_bucket

    scheme = Bucketed(BucketedSpec(buckets=8, max_distance=20), d_model=D, max_positions=None, heads=H, causal=False)
    bias = scheme.attn_bias(H, 3, 6, offset=2)  # queries at positions 2..4, keys 0..5
    assert bias.shape == (H, 3, 6)
    for i in range(3):
        for j in range(6):
            row = relative_bucket(torch.tensor(j - (i + 2)), causal=False, buckets=8, max_distance=20)
            torch.testing.assert_close(bias[:, i, j], scheme.bias.weight[row])


def test_one_bias_table_per_stack_read_by_its_layers_only_in_self_attention() -> None:
    model = tiny_model(T5_LAYERS)
    tables = [n for n, _ in model.named_parameters() if "positional" in n]
    assert tables == ["src_embed.positional.bias.weight", "tgt_embed.positional.bias.weight"]
    assert model.src_embed.positional.causal is False and model.tgt_embed.positional.causal is True
    assert model.src_embed.positional.bias.weight.shape == (8, 4)  # (buckets, the stack's heads)


def test_incremental_decoding_with_the_bucketed_bias_equals_the_full_pass() -> None:
    from tbuild.components.transformer import DecoderCache

    model = tiny_model(T5_LAYERS)
    src = torch.randint(4, 40, (2, 6))
    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[1, 4:] = True
    tgt = torch.randint(4, 40, (2, 25))  # past max_distance: the last buckets too
    memory, pad = model.encode(src, pad)
    full = model.decode(tgt, memory, pad)
    cache = DecoderCache()
    steps = [model.decode(tgt[:, t:t + 1], memory, pad, cache) for t in range(tgt.size(1))]
    assert (torch.cat(steps, 1) - full).abs().max() <= 1e-5


def test_unscaled_attention_is_softmax_of_qk_without_the_square_root() -> None:
    att = init(MultiHeadAttention(MultiHeadSpec(scaled=False), d_model=D, heads=H, d_k=D // H, d_v=D // H,
                                  dropout=0.0, causal=False))
    scaled = init(MultiHeadAttention(MultiHeadSpec(), d_model=D, heads=H, d_k=D // H, d_v=D // H, dropout=0.0,
                                     causal=False))
    scaled.load_state_dict(att.state_dict())
    with torch.no_grad():
        scaled.w_q.weight.mul_(math.sqrt(D // H))  # T5's folding: W^Q·√d_k scaled = W^Q unscaled
        scaled.w_q.bias.mul_(math.sqrt(D // H))
    x = torch.randn(2, 20, D, dtype=torch.float64)  # past the few-query path: the fused kernel's scale too
    close(att(x), scaled(x))
    close(att(x[:, :3]), scaled(x[:, :3]))


def test_bucketed_max_distance_must_pass_the_exact_buckets() -> None:
    with pytest.raises(SpecError, match="max_distance"):
        load_spec({"model": {"positional": {"kind": "bucketed", "buckets": 32, "max_distance": 16}}})
