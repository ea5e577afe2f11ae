"""The tagging task as the spec knows it (torch-free; its engine half: ``tagging.py``): words and their tags
through an encoder with a token-classification head, selected on perplexity or the share of words tagged
right."""

from __future__ import annotations

from dataclasses import dataclass, field

from tbuild.builder.spec.tasks import Check, TaskDeclaration, metric_fits_the_task

from .spec_checks import labels_fit_the_graph, masking_fits_the_head


@dataclass(frozen=True)
class LabelsDeclaration(TaskDeclaration):
    """A task of labels (tagging, classification, the masked LM, the sentence encoder): selected on its loss or
    the share of labels right (accuracy, which no other task offers)."""

    metrics: dict[str, bool] = field(default_factory=lambda: {"ppl": False, "accuracy": True})
    checks: tuple[Check, ...] = (labels_fit_the_graph, metric_fits_the_task, masking_fits_the_head)
    needs: dict[str, str] = field(default_factory=lambda: {
        "accuracy": "accuracy scores a tagger's labels or a classifier's (model.kind encoder_only)"})
    other_metric: str = "{metric} scores decoded outputs; a tagger or classifier is selected on accuracy or ppl"


TAGGING = LabelsDeclaration("tagging", "tbuild.engine.tasks.tagging", heads=("token_classification",),
                            datasets=("tagging",))
