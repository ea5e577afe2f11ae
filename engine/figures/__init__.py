"""Figures: training curves and attention heatmaps (``plots.py``), a spec's diagram drawn (``drawing.py``)."""
