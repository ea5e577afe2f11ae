"""The masked LM as the spec knows it (torch-free; its engine half: ``masked_lm.py``): plain text with pieces
hidden (``data.masking``) through an encoder with a masked_lm head, selected on perplexity or the share of hidden
pieces predicted right."""

from __future__ import annotations

from tbuild.builder.spec.tasks import TaskDeclaration

from .tagging_declaration import LABELS

MASKED_LM = TaskDeclaration("masked_lm", "tbuild.engine.tasks.masked_lm", heads=("masked_lm",), metrics=LABELS)
