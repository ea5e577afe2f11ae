"""The classification task as the spec knows it (torch-free; its engine half: ``classification.py``): lines
and their labels through an encoder with a sequence-classification head."""

from __future__ import annotations

from .tagging_declaration import LabelsDeclaration

CLASSIFICATION = LabelsDeclaration("classification", "tbuild.engine.tasks.classification",
                                   heads=("sequence_classification",), datasets=("classification",))
