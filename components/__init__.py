"""Registered building blocks: attention, positional schemes, feed-forward networks, norms, pointers, heads,
character-aware input.

Importing this package is torch-free: it declares the built-in specs. The blocks (torch modules)
register with their registries when ``tbuild.components.attention`` etc. are imported, as
``tbuild.builder.build`` does.
"""

from . import specs  # noqa: F401  (declares the built-in specs)
from .plugins import load_plugins
from .registry import ATTENTION, CHAR_INPUT, FFN, HEAD, NORM, POINTER, POSITIONAL, REGISTRIES, Registry

__all__ = ["ATTENTION", "CHAR_INPUT", "FFN", "HEAD", "NORM", "POINTER", "POSITIONAL", "REGISTRIES", "Registry",
           "load_plugins"]
