"""Every family tbuild converts, one module each: a folder's family by config.json's ``model_type``
(``FAMILIES``), an export's by the class key the export check chose (``EXPORTS``)."""

from __future__ import annotations

from . import bert, gpt2, llama, m2m100, marian, mbart, pegasus, t5
from .family import Family

ALL: tuple[Family, ...] = (marian.MARIAN, pegasus.PEGASUS, m2m100.M2M100, gpt2.GPT2, llama.LLAMA, bert.BERT,
                          t5.T5, mbart.BART)
FAMILIES = {model_type: f for f in ALL for model_type in f.model_types}
EXPORTS = {key: f for f in ALL for key in f.exports}
