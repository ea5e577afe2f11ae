"""Training, decoding and evaluation engine."""
