"""Specs in, models out: the schema, the loader and ``build_model``."""

from .build import PAD_ID, build_model
from .loader import LoadedSpec, SpecError, load_spec
from .schema import Spec

__all__ = ["PAD_ID", "LoadedSpec", "Spec", "SpecError", "build_model", "load_spec"]
