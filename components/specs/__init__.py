"""The torch-free spec models of the built-in blocks, declared to their registries on import."""

from . import attention, char_input, feedforward, head, norm, pointer, positional  # noqa: F401  (declares the built-in specs)
