"""Decoding: beam search, the translator, evaluation and attention maps."""
