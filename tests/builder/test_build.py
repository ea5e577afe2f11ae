"""``build_model`` and the resolved view it builds from: groups, defaults, uses."""

from __future__ import annotations

from tbuild.builder import build_model, load_spec
from tbuild.builder.resolved import resolve
from tbuild.components.attention import LocalAttention, MultiHeadAttention
from tbuild.components.spec_base import Use

from ..conftest import TINY

LOCAL3 = {"kind": "local", "window": 3}
HETERO = {"model": {**TINY["model"], "encoder": {
    "heads": 4, "d_ff": 32, "groups": [{"repeat": 4, "attention": LOCAL3}, {"repeat": 2}]}}}


def test_heterogeneous_stack_builds_groups_in_order() -> None:
    spec = load_spec(HETERO).spec
    assert spec.model.encoder.layers == 6
    net = build_model(spec)
    kinds = [type(layer.self_attn.sublayer) for layer in net.encoder]
    assert kinds == [LocalAttention] * 4 + [MultiHeadAttention] * 2
    assert all(layer.self_attn.sublayer.window == 3 for layer in net.encoder[:4])
    assert [type(layer.self_attn.sublayer) for layer in net.decoder] == [MultiHeadAttention] * 2


def test_resolved_view_defaults_paths_and_uses() -> None:
    spec = load_spec({"model": {**TINY["model"], "norm_placement": "pre", "encoder": {
        "heads": 4, "d_ff": 32, "norm": {"kind": "rmsnorm"},
        "groups": [{"repeat": 1, "attention": LOCAL3}, {"repeat": 1}]}}}).spec.model
    view = resolve(spec)
    enc, dec = view.stacks
    assert [g.attention.kind for g in enc.groups] == ["local", "multihead"]
    assert enc.groups[1].attention is spec.attention and enc.groups[0].cross_attention is None
    assert dec.groups[0].cross_attention is spec.cross_attention
    assert enc.final_norm is spec.encoder.norm and dec.final_norm is spec.norm  # pre-norm: final norms
    assert (enc.heads, enc.d_k, enc.d_v, enc.d_ff) == (4, 4, 4, 32)
    by_path = {c.path: c for c in view.components}
    enc_self = Use("encoder", "self", 4, 4, 4, 32, False, None)
    dec_self = Use("decoder", "self", 4, 4, 4, 32, True, None)
    assert by_path[("encoder", "groups", 0, "attention")].uses == (enc_self,)
    assert by_path[("attention",)].uses == (enc_self, dec_self)
    assert by_path[("cross_attention",)].uses == (Use("decoder", "cross", 4, 4, 4, 32, False, None),)
    assert [u.role for u in by_path[("encoder", "norm")].uses] == ["norm", "final_norm"]
    assert [u.stack for u in by_path[("positional",)].uses] == ["encoder", "decoder"]


def test_post_norm_has_no_final_norms_unless_asked() -> None:
    spec = load_spec(TINY).spec.model
    assert all(stack.final_norm is None for stack in resolve(spec).stacks)
    spec = load_spec({"model": {**TINY["model"], "final_norm": True}}).spec.model
    assert all(stack.final_norm is spec.norm for stack in resolve(spec).stacks)
