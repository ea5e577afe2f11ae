"""Specs in, models out: the schema, the loader and ``build_model``.

The schema and loader are torch-free; ``build_model`` imports torch on first use,
so ``from tbuild.builder import load_spec`` stays fast.
"""

from typing import Any

from .loader import LoadedSpec, SpecError, load_spec
from .spec import Spec

__all__ = ["LoadedSpec", "Spec", "SpecError", "build_model", "load_spec"]


def __getattr__(name: str) -> Any:
    if name == "build_model":
        from . import build

        return getattr(build, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
