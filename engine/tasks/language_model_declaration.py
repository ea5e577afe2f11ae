"""The language model and the prefix LM as the spec knows them (torch-free; their engine half:
``language_model.py``): one side of text through a decoder-only model, selected on perplexity; source-target
pairs through a decoder-only model with a prefix (``model.prefix_lm``), selected as a translator is."""

from __future__ import annotations

from tbuild.builder.spec.tasks import TaskDeclaration

from .translation_declaration import DECODED

LANGUAGE_MODEL = TaskDeclaration("language_model", "tbuild.engine.tasks.language_model", models=("decoder_only",))
PREFIX_LM = TaskDeclaration("prefix_lm", "tbuild.engine.tasks.language_model", models=("prefix_lm",),
                            metrics=DECODED)
