"""The parsing task as the spec knows it (torch-free; its engine half: ``task.py``): the treebank's sentences
and linearized trees through an encoder-decoder, selected as a translator is or on EVALB's F1 of the decoded
trees."""

from __future__ import annotations

from tbuild.builder.spec.base import FieldError
from tbuild.builder.spec.tasks import Sections, TaskDeclaration

from ..translation_declaration import DECODED, PAIRS

F1 = ("f1 (EVALB) scores parse trees: it needs the treebank data set (data.dataset: treebank); for translation "
      "choose bleu, bleu_lowercase or chrf")


def trees_for_f1(spec: Sections) -> None:
    """EVALB's F1 scores parse trees: the data set's targets must be trees."""
    if spec.train.select.metric == "f1" and (spec.data.dataset is None or not spec.data.dataset.trees):
        raise FieldError(("train", "select", "metric"), F1)


PARSING = TaskDeclaration("parsing", "tbuild.engine.tasks.parsing.task", datasets=("treebank",),
                          metrics=DECODED | {"f1": True}, checks=(*PAIRS, trees_for_f1), needs={"f1": F1})
