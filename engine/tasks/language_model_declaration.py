"""The language model and the prefix LM as the spec knows them (torch-free; their engine half:
``language_model.py``): one side of text through a decoder-only model, selected on perplexity; source-target
pairs through a decoder-only model with a prefix (``model.prefix_lm``), selected as a translator is."""

from __future__ import annotations

from tbuild.builder.spec.tasks import TaskDeclaration, metric_fits_the_task

from .spec_checks import labels_fit_the_graph, masking_fits_the_head, one_side_of_text, text_for_a_language_model
from .translation_declaration import DECODED, PAIRS

LANGUAGE_MODEL = TaskDeclaration(
    "language_model", "tbuild.engine.tasks.language_model", models=("decoder_only",),
    checks=(labels_fit_the_graph, masking_fits_the_head, text_for_a_language_model, one_side_of_text,
            metric_fits_the_task),
    other_metric="{metric} scores translations; a language model is selected on validation perplexity: use ppl")
PREFIX_LM = TaskDeclaration("prefix_lm", "tbuild.engine.tasks.language_model", models=("prefix_lm",),
                            metrics=DECODED, checks=PAIRS)
