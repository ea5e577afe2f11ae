"""The parsing task as the spec knows it (torch-free; its engine half: ``task.py``): the treebank's sentences
and linearized trees through an encoder-decoder, selected as a translator is or on EVALB's F1 of the decoded
trees."""

from __future__ import annotations

from tbuild.builder.spec.tasks import TaskDeclaration

from ..translation_declaration import DECODED

PARSING = TaskDeclaration("parsing", "tbuild.engine.tasks.parsing.task", datasets=("treebank",),
                          metrics=DECODED | {"f1": True})
