"""The FFN activations of Hugging Face configs (``activation_function``, ``hidden_act``) and tbuild's FFN kinds of
the two-layer shape: one table for the exports and the imports."""

from __future__ import annotations

TO_HF = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new", "silu": "silu"}  # FFN kind -> transformers' name
FROM_HF = {**{name: kind for kind, name in TO_HF.items()},
           "gelu_pytorch_tanh": "gelu_tanh", "swish": "silu"}  # the same functions under other names (ACT2FN)
