"""The grapheme-to-phoneme task as the spec knows it (torch-free; its engine half: ``task.py``): a word's
letters and its phones, a translation's pairs through its encoder-decoder, claimed by its data set (``cmudict``)
or declared (``task: g2p``, over any letters-and-phones files), selected as a translator is or on an error rate
of the decoded validation words (lower is better). Declaring it declares its data set (``cmudict.py``)."""

from __future__ import annotations

from tbuild.builder.spec.tasks import TaskDeclaration

from ..translation_declaration import DECODED, PAIRS
from . import cmudict  # noqa: F401  (declare the cmudict data set)

RATES = {"per": False, "wer": False}  # phone and word error rates in %: lower is better
NEEDS = ("scores a grapheme-to-phoneme model's phones: declare the task (task: g2p, or data.dataset cmudict); a "
         "translator chooses bleu, bleu_lowercase or chrf")

G2P = TaskDeclaration("g2p", "tbuild.engine.tasks.g2p.task", datasets=("cmudict",), metrics=DECODED | RATES,
                      checks=PAIRS, needs={"per": f"per (phone error rate) {NEEDS}",
                                           "wer": f"wer (word error rate) {NEEDS}"})
