"""The translation task as the spec knows it (torch-free; its engine half: ``translation.py``): source-target
pairs through an encoder-decoder, selected on perplexity or a score of the decoded validation sources."""

from __future__ import annotations

from tbuild.builder.spec.tasks import TaskDeclaration

DECODED = {"ppl": False, "bleu": True, "bleu_lowercase": True, "chrf": True}  # sacreBLEU's scores: higher is better

TRANSLATION = TaskDeclaration("translation", "tbuild.engine.tasks.translation", models=("encoder_decoder",),
                              metrics=DECODED)
