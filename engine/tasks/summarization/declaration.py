"""The summarization task as the spec knows it (torch-free; its engine half: ``task.py``): a document or
sentence and its summary or headline, a translation's pairs through its encoder-decoder, claimed by no model,
head or data set (a spec declares it: ``task: summarization``), selected as a translator is or on ROUGE of the
decoded validation sources. Declaring it declares its data sets too (``aeslc.py``, ``scitldr.py``)."""

from __future__ import annotations

from tbuild.builder.spec.tasks import TaskDeclaration

from ..translation_declaration import DECODED, PAIRS
from . import aeslc, scitldr  # noqa: F401  (declare the aeslc and scitldr data sets)

# ROUGE F1 (higher is better): the record's key, the rouge-score library's name, the name in tables
METRICS = (("rouge1", "rouge1", "ROUGE-1"), ("rouge2", "rouge2", "ROUGE-2"), ("rouge_l", "rougeL", "ROUGE-L"))
ROUGE = ("ROUGE F1 scores summaries: declare the task (task: summarization); a translator chooses bleu, "
         "bleu_lowercase or chrf")

SUMMARIZATION = TaskDeclaration("summarization", "tbuild.engine.tasks.summarization.task",
                                metrics=DECODED | {key: True for key, _, _ in METRICS}, checks=PAIRS,
                                needs={key: f"{key}: {ROUGE}" for key, _, _ in METRICS})
