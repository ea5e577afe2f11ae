"""Fixtures shared by the export tests."""

from __future__ import annotations

from typing import Literal

import pytest


@pytest.fixture
def dummy_attention():  # noqa: ANN201
    """A kind registered in-process (as a plugin would be), removed afterwards."""
    from tbuild.components import ATTENTION
    from tbuild.components.attention import MultiHeadAttention
    from tbuild.components.specs.attention import AttentionSpecBase

    class DummySpec(AttentionSpecBase):
        kind: Literal["dummy_export_test"] = "dummy_export_test"
        kv_heads: int | None = None
        bias: bool = True

    ATTENTION.register(DummySpec, origin="test")(MultiHeadAttention)
    try:
        yield
    finally:
        ATTENTION._specs.pop("dummy_export_test")
        ATTENTION._blocks.pop("dummy_export_test")
        ATTENTION.generation += 1
