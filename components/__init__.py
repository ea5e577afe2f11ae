"""Registered building blocks: attention, positional schemes, feed-forward networks, norms."""

from . import attention, feedforward, norm, positional  # noqa: F401  (registers the built-in blocks)
from .plugins import load_plugins
from .registry import ATTENTION, FFN, NORM, POSITIONAL, REGISTRIES, Registry

__all__ = ["ATTENTION", "FFN", "NORM", "POSITIONAL", "REGISTRIES", "Registry", "load_plugins"]
