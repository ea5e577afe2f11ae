"""The masked LM as the spec knows it (torch-free; its engine half: ``masked_lm.py``): plain text with pieces
hidden (``data.masking``) through an encoder with a masked_lm head, selected on perplexity or the share of hidden
pieces predicted right."""

from __future__ import annotations

from tbuild.builder.spec.tasks import metric_fits_the_task

from .spec_checks import labels_fit_the_graph, masking_fits_the_head, one_side_of_text
from .tagging_declaration import LabelsDeclaration

# the checks of a model of plain text (the masked LM's, the sentence encoder's)
TEXT = (labels_fit_the_graph, metric_fits_the_task, masking_fits_the_head, one_side_of_text)

MASKED_LM = LabelsDeclaration("masked_lm", "tbuild.engine.tasks.masked_lm", heads=("masked_lm",), checks=TEXT)
