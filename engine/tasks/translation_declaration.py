"""The translation task as the spec knows it (torch-free; its engine half: ``translation.py``): source-target
pairs through an encoder-decoder, selected on perplexity or a score of the decoded validation sources."""

from __future__ import annotations

from tbuild.builder.spec.tasks import TaskDeclaration, metric_fits_the_task

from .spec_checks import labels_fit_the_graph, masking_fits_the_head, pairs_are_not_text, text_for_a_language_model

DECODED = {"ppl": False, "bleu": True, "bleu_lowercase": True, "chrf": True}  # sacreBLEU's scores: higher is better
# the checks of a task of pairs (a decoder-only model without a prefix reads text: text_for_a_language_model)
PAIRS = (labels_fit_the_graph, metric_fits_the_task, masking_fits_the_head, pairs_are_not_text,
         text_for_a_language_model)

TRANSLATION = TaskDeclaration("translation", "tbuild.engine.tasks.translation", models=("encoder_decoder",),
                              metrics=DECODED, checks=PAIRS)
