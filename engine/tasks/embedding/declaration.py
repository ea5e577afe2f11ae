"""The sentence-embedding task as the spec knows it (torch-free; its engine half: ``task.py``): an encoder with
a sentence_embedding head, which nothing trains."""

from __future__ import annotations

from tbuild.builder.spec.tasks import TaskDeclaration

from ..tagging_declaration import LABELS

SENTENCE_EMBEDDING = TaskDeclaration("sentence_embedding", "tbuild.engine.tasks.embedding.task",
                                     heads=("sentence_embedding",), metrics=LABELS)
