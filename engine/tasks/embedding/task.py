"""The task of a run with a ``sentence_embedding`` head (a headless ``BertModel``, ``XLMRobertaModel`` or a
sentence-transformers folder imported by `tbuild import hf`): nothing trains it and nothing decodes it; it
gives sentence vectors (`tbuild embed`, ``vectors.py``) and starts a tagger or classifier (``train.init``).
Every other command refuses it in one line saying so."""

from __future__ import annotations

from tbuild.builder.spec import Spec

from ...errors import TbuildError
from ..base import Task
from ..registry import register_task


@register_task
class SentenceEmbedding(Task):
    """An encoder's states pooled into one vector per input (as sentence-transformers computes them)."""

    name = "sentence_embedding"
    what = "a sentence encoder"
    unit = "lines"

    def refuse(self, command: str, spec: Spec) -> TbuildError:
        return TbuildError(f"tbuild {command} of a sentence encoder (model.head sentence_embedding) is not "
                           f"supported: {spec.name or 'this run'} gives sentence vectors (tbuild embed) and starts a "
                           "tagger or classifier (train.init)")
