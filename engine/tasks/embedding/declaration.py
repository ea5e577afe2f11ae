"""The sentence-embedding task as the spec knows it (torch-free; its engine half: ``task.py``): an encoder with
a sentence_embedding head, which nothing trains."""

from __future__ import annotations

from ..masked_lm_declaration import TEXT
from ..tagging_declaration import LabelsDeclaration

SENTENCE_EMBEDDING = LabelsDeclaration("sentence_embedding", "tbuild.engine.tasks.embedding.task",
                                       heads=("sentence_embedding",), checks=TEXT)
