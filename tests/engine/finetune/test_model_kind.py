"""A model kind's weight declaration alone is enough: a toy decoder-only kind, declared here and nowhere
else, gets fine-tuning parts (frozen names, one-line refusals naming its parts), vocabulary rows matched by
piece and per-layer blocks in a load plan, and an export name map with its layers expanded."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from tbuild.builder import load_spec
from tbuild.builder.spec import InitSpec, TokenizerSpec
from tbuild.components.weights import LAYER, Stack, WeightTree, params, weight_tree
from tbuild.engine.data.tokenizer import Tokenizer
from tbuild.engine.errors import TbuildError
from tbuild.engine.finetune.parts import frozen_names, part_prefixes
from tbuild.engine.finetune.plan import make_plan
from tbuild.engine.finetune.source import Source

VOCAB = 24


class ToyBlock(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.q, self.kv, self.mlp = nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(d, d, bias=False)


class ToyLM(nn.Module):
    """A decoder-only kind: its stack is the user's ``decoder``, its layers the module's ``layers``."""

    WEIGHTS = WeightTree(
        stacks=(Stack("decoder", layers="layers", embedding="embed", norm="norm"),),
        output="head",
        vocab_rows=frozenset({"embed.weight", "head.weight"}),
        exports={"toy": {"tok_embeddings.weight": ("embed.weight",),
                         **params(f"layers.{LAYER}.attention.wqkv", f"layers.{LAYER}.q", f"layers.{LAYER}.kv"),
                         f"layers.{LAYER}.feed_forward.w1.weight": (f"layers.{LAYER}.mlp.weight",),
                         **params("norm", "norm", names=("scale", "offset")),
                         "output.weight": ("head.weight",)}},
    )

    def __init__(self, layers: int = 2, d: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d)
        self.layers = nn.ModuleList(ToyBlock(d) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, VOCAB, bias=False)


def test_parts_come_from_the_declaration() -> None:
    model = ToyLM()
    assert weight_tree(model) is ToyLM.WEIGHTS
    assert frozen_names(["embeddings"], model) == {"embed.weight", "head.weight"}
    assert frozen_names(["decoder.norm"], model) == {"norm.weight", "norm.bias"}
    assert frozen_names(["decoder.layers.1"], model) == {"layers.1.q.weight", "layers.1.q.bias", "layers.1.kv.weight",
                                                         "layers.1.kv.bias", "layers.1.mlp.weight"}
    assert len(frozen_names(["decoder"], model)) == 12 and part_prefixes("decoder.layers.0-1", model) == (
        "layers.0.", "layers.1.")
    with pytest.raises(TbuildError, match=r"^train.init.freeze: decoder.layers.2: the decoder has layers 0-1$"):
        part_prefixes("decoder.layers.2", model)
    with pytest.raises(TbuildError, match=r"parts: embeddings, decoder, decoder.norm, decoder.layers.I, "
                                          r"decoder.layers.I-J$"):
        part_prefixes("encoder", model)


def _tokenizer(tmp_path: Path) -> Tokenizer:
    words = ["a", "b", "ab", "ba", "abc", "cab", "bca", "cc", "aab", "bbc"]
    lines = [" ".join(words[(i * k) % len(words)] for k in range(1, 6)) for i in range(60)]
    return Tokenizer.train(lines, TokenizerSpec(vocab_size=VOCAB), tmp_path / "spm")


def test_a_load_plan_remaps_its_vocabulary_rows_and_groups_its_layers(tmp_path: Path) -> None:
    tokenizer = _tokenizer(tmp_path)
    assert tokenizer.vocab_size == VOCAB
    source_model = ToyLM(layers=1)
    tensors = {n: p.detach() for n, p in source_model.named_parameters()}
    run = SimpleNamespace(tokenizer=tokenizer.path, dir=SimpleNamespace(path=tmp_path / "source"),
                          spec=load_spec({}).spec)  # its data.tokenizer.special: tbuild's own
    source = Source(run, "best.safetensors", 40, tensors, {})  # type: ignore[arg-type]
    init = InitSpec.model_validate({"from": "source", "vocab": "remap", "freeze": ["decoder.layers.0"],
                                    "copy": {"decoder.layers.1": "decoder.layers.0"}})
    plan = make_plan(ToyLM(layers=2), source, init, tokenizer)
    status = {e.name: e.status for e in plan.entries}
    assert status["embed.weight"] == status["head.weight"] == "remapped"
    assert status["layers.0.q.weight"] == status["norm.weight"] == "loaded"
    assert status["layers.1.kv.bias"] == "copied"
    assert {e.name for e in plan.entries if e.frozen} == {n for n in status if n.startswith("layers.0.")}
    blocks = [line.split()[0] for line in plan.block_lines()]
    assert blocks == ["embed", "decoder.layers.0", "decoder.layers.1", "norm", "head"]


def test_an_export_map_comes_from_the_declaration() -> None:
    model = ToyLM(layers=3)
    names = weight_tree(model).export_names("toy", model)
    assert names["layers.2.attention.wqkv.bias"] == ("layers.2.q.bias", "layers.2.kv.bias")
    assert names["norm.scale"] == ("norm.weight",) and "layers.3.feed_forward.w1.weight" not in names
    tensors = dict(model.named_parameters())
    assert {s for sources in names.values() for s in sources} == set(tensors)  # every weight, each once
    fused = torch.cat([tensors[s] for s in names["layers.1.attention.wqkv.weight"]])
    assert fused.shape == (24, 8)
    with pytest.raises(KeyError, match="ToyLM declares no ctranslate2 names"):
        weight_tree(model).export_names("ctranslate2", model)
