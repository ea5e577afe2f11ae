"""Sweeps: a base spec trained with rows of overrides (the paper's Table 3), run and tabulated."""
