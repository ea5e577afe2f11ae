"""train.adapters checked on the model built on the meta device, before a run writes anything
(``check_adapters``): a tagger whose labels are still ``from_data`` (fitted only once its data is read), each
target matched and the rank held to the narrowest adapted layer's width (min(in, out) bounds B A's rank)."""

from __future__ import annotations

import pytest

from tbuild.builder import load_spec
from tbuild.engine.errors import TbuildError
from tbuild.engine.finetune.lora import check_adapters

TAGGER = "specs/examples/graphs/pos-tagger.yaml"  # d_model 256, d_ff 1024, labels: from_data


def _spec(*adapters: str):  # noqa: ANN202 - a Spec
    return load_spec(TAGGER, ["train.init.from=runs/base", *(f"train.adapters.{a}" for a in adapters)]).spec


def test_a_tagger_with_labels_from_data_is_checked() -> None:
    assert _spec("targets=[ffn]").model.head.labels == "from_data"
    check_adapters(_spec("targets=[ffn]", "r=256"))  # the widest the feed-forward layers (256 -> 1024) allow
    with pytest.raises(TbuildError, match=r"^train.adapters.r 257: above the width of encoder.0.ffn.sublayer.w1 "
                                          r"\(256 -> 1024\)"):
        check_adapters(_spec("targets=[ffn]", "r=257"))
    with pytest.raises(TbuildError, match="^train.adapters.targets: 'head' matches no linear module"):
        check_adapters(_spec("targets=[head]"))

