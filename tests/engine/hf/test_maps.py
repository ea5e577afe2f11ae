"""Each family's one map, used both ways (engine/hf/maps.py): for every class an export writes, the map names
every tbuild parameter, writes tensors of the class's shapes, and read backwards gives every parameter back
exactly (the same map, its transforms inverted: transposes, fused Q|K|V split, RoPE's rows and Marian's
features reordered)."""

from __future__ import annotations

import pytest
import torch

from tbuild.builder import build_model, load_spec
from tbuild.builder.resolved import resolve
from tbuild.engine.export.targets import export_class
from tbuild.engine.hf.families import EXPORTS
from tbuild.engine.hf.family import shapes, tensors
from tbuild.engine.hf.maps import from_hf, to_hf
from tests.conftest import TINY

transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install -e '.[export]')")

LM = {"kind": "decoder_only", "vocab_size": 40, "d_model": 16, "decoder": {"layers": 2, "heads": 4, "d_ff": 32},
      "norm_placement": "pre", "max_positions": 24, "scale_embeddings": False, "tie_embeddings": "none"}
ENCODER = {"kind": "encoder_only", "vocab_size": 40, "d_model": 16, "encoder": {"layers": 2, "heads": 4, "d_ff": 32},
           "positional": {"kind": "learned"}, "max_positions": 24, "scale_embeddings": False, "ffn": {"kind": "gelu"}}
BERT = {"norm_placement": "post", "embedding_norm": True}
PLACEMENTS = (("post-norm", BERT), ("pre-norm", {"norm_placement": "pre"}))
HEADS = {"tagger": ({"kind": "token_classification", "labels": ["A", "B"]}, {"kind": "tagging", "source": "files"}),
         "classifier": ({"kind": "sequence_classification", "labels": ["A", "B"], "pooling": "first", "dense": True},
                        {"kind": "classification"}),
         "masked LM": ({"kind": "masked_lm", "transform": True}, "text")}
SPECS = {
    "marian": TINY | {"model": TINY["model"] | {"norm": {"kind": "layernorm", "eps": 1e-5},
                                                "tie_embeddings": "none", "src_vocab_size": 30}},
    "pegasus": TINY | {"model": TINY["model"] | {"norm_placement": "pre"}},
    "gpt2": {"model": LM | {"positional": {"kind": "learned"}, "ffn": {"kind": "gelu"}}, "data": {"dataset": "text"}},
    "llama": {"model": LM | {"positional": {"kind": "rope"}, "ffn": {"kind": "swiglu"}, "norm": {"kind": "rmsnorm"},
                             "attention": {"kind": "multihead", "bias": True, "kv_heads": 2}},
              "data": {"dataset": "text"}},
    **{f"{name} {where}": {"model": ENCODER | fields | {"head": head}, "data": {"dataset": data}}
       for name, (head, data) in HEADS.items() for where, fields in PLACEMENTS},
}


def _key(spec) -> str:  # noqa: ANN001
    return export_class(spec, resolve(spec.model), "hf", lambda what: pytest.fail(what))


@pytest.mark.parametrize("name", SPECS)
def test_a_map_read_backwards_gives_every_parameter_back(name: str) -> None:
    spec = load_spec(SPECS[name]).spec
    model = build_model(spec).eval()
    g = torch.Generator().manual_seed(0)
    ours = {n: torch.randn(t.shape, generator=g) for n, t in tensors(model).items()}
    key = _key(spec)
    family, cls = EXPORTS[key], EXPORTS[key].exports[key]
    hf = getattr(transformers, cls)(family.config(model, spec, key))
    theirs = {n: p.shape for n, p in hf.named_parameters(remove_duplicate=False)}  # tied tables under each name
    names = family.names(spec, model, cls)
    written = to_hf(names, ours, theirs)
    assert all(written[n].shape == theirs[n] for n in written)
    mapped = {n for n in ours if not n.endswith("positional.embedding.weight")}  # a learned table: the family's
    assert mapped <= {o for r in names.values() for o in r.ours}  # every other parameter has a name  (extra)
    back = from_hf(names, written, shapes(model))
    assert set(back) == mapped and all(torch.equal(back[n], ours[n]) for n in mapped), name
