"""The tagging task as the spec knows it (torch-free; its engine half: ``tagging.py``): words and their tags
through an encoder with a token-classification head, selected on perplexity or the share of words tagged
right."""

from __future__ import annotations

from tbuild.builder.spec.tasks import TaskDeclaration

LABELS = {"ppl": False, "accuracy": True}  # a model of labels: its loss, or the share of labels right

TAGGING = TaskDeclaration("tagging", "tbuild.engine.tasks.tagging", heads=("token_classification",),
                          datasets=("tagging",), metrics=LABELS)
