"""A whole spec: its sections, its task (named, or the one its claims give: ``tasks.py``), the checks across
the sections that are no task's (the task checks the rest: its data fit its model, its metric), vocabulary
sizes and the architecture hash.
"""

from __future__ import annotations

import hashlib
import json

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from tbuild.components.spec_base import StrictModel
from tbuild.components.specs.special import DEFAULT, Specials

from ..resolved import resolve
from .base import FieldError
from .data import DataSpec
from .decode import DecodeSpec
from .model import ModelSpec
from .tasks import TaskDeclaration, claims_fit_the_task, declarations, task_name
from .train import TrainSpec


def _trees(data: DataSpec) -> bool:
    """Whether the data set's targets are parse trees (the treebank's)."""
    return data.dataset is not None and data.dataset.trees


def _without_late_defaults(model: dict) -> dict:
    """The dumped model section without the fields that joined the spec after models were trained, where they
    hold their defaults, so that those models keep their architecture hash: ``kind`` (encoder_decoder),
    ``decoder.pointer``, ``head``, ``prefix_lm`` and ``char_input`` (None), each stack's and group's ``order``
    (standard; a group's only where its stack's is), ``head.piece`` (first), ``head.dense``, ``head.transform`` and
    ``head.bos`` (false), ``char_input.pool`` (piece), ``dropout.token`` (0), ``embedding_norm`` (false),
    ``silent_ids`` (none) and rope's ``scaling`` (None). (Component fields that joined later leave the dump
    themselves: ``components.spec_base.LateFields``.)"""
    if model.get("kind") == "encoder_decoder":
        del model["kind"]
    if model.get("dropout", {}).get("token") == 0.0:
        del model["dropout"]["token"]
    if model.get("embedding_norm") is False:
        del model["embedding_norm"]
    if model.get("silent_ids") == []:
        del model["silent_ids"]
    if model.get("positional", {}).get("kind") == "rope" and model["positional"].get("scaling", 0) is None:
        del model["positional"]["scaling"]
    for key in ("head", "prefix_lm", "char_input"):
        if model.get(key) is None:
            model.pop(key, None)
    if model.get("head") and model["head"].get("piece") == "first":
        del model["head"]["piece"]
    if model.get("char_input") and model["char_input"].get("pool") == "piece":
        del model["char_input"]["pool"]
    for key in ("dense", "transform", "bos"):
        if model.get("head") and model["head"].get(key) is False:
            del model["head"][key]
    for name in ("encoder", "decoder"):
        stack = model.get(name)
        if not stack:
            continue
        if name == "decoder" and stack.get("pointer") is None:
            stack.pop("pointer", None)
        plain = stack.get("order") in (None, "standard")
        if plain:
            stack.pop("order", None)
        for group in stack.get("groups") or []:
            if group.get("order") is None or (plain and group.get("order") == "standard"):
                group.pop("order", None)
    return model


class Spec(StrictModel):
    """A whole tbuild spec."""

    name: str | None = Field(None, description="Run name; default: the spec file's stem.")
    extends: str | None = Field(None, description="A spec this one extends (path relative to this file).")
    output_dir: str | None = Field(None, description="Run directory; default runs/<name> (relative to the cwd).")
    task: str | None = Field(None, description="The task the run is (translation, language_model, prefix_lm, "
                             "tagging, classification, masked_lm, parsing, sentence_embedding, or one a plugin "
                             "declares); default: the one the spec's model.head, data.dataset or model.kind claims "
                             "(translation where none does).")
    model: ModelSpec = Field(default_factory=ModelSpec, description="Architecture.")
    data: DataSpec = Field(default_factory=DataSpec, description="Data and tokenizer.")
    train: TrainSpec = Field(default_factory=TrainSpec, description="Training.")
    decode: DecodeSpec = Field(default_factory=DecodeSpec, description="Decoding.")

    @model_serializer(mode="wrap")
    def _without_default_task(self, handler: SerializerFunctionWrapHandler) -> dict:
        """``task`` is dumped only where the spec names one, so that specs written before it resolve as they did."""
        data = handler(self)
        if data.get("task", "") is None:
            del data["task"]
        return data

    @model_validator(mode="after")
    def _task_is_declared(self) -> Spec:
        known = declarations()
        if self.task is not None and self.task not in known:
            raise FieldError(("task",), f"unknown task {self.task!r}; the tasks are: {', '.join(sorted(known))}")
        claims_fit_the_task(self)
        return self

    def task_name(self) -> str:
        """The run's task: ``task`` where the spec names one, else the one its claims give (``tasks.task_name``)."""
        return task_name(self)

    def declared_task(self) -> TaskDeclaration:
        """The declaration of the run's task (its claims, metrics and spec checks)."""
        return declarations()[self.task_name()]

    @model_validator(mode="after")
    def _blocks_fit_where_used(self) -> Spec:
        """Each component spec checked against the places the model uses it (``check(uses)``, on the
        resolved view: a group's block, or its stack's, or the model's)."""
        for component in resolve(self.model).components:
            try:
                component.spec.check(component.uses)
            except ValueError as e:
                raise FieldError(("model", *component.path), str(e)) from None
        return self

    @model_validator(mode="after")
    def _select_fits_the_data(self) -> Spec:
        select = self.train.select
        if self.data.valid is None and (select.metric != "ppl" or select.patience is not None):
            what = "metric" if select.metric != "ppl" else "patience"
            raise FieldError(("train", "select", what), f"train.select.{what} scores validations, and there are "
                             "none: set data.valid")
        return self

    @model_validator(mode="after")
    def _packing_fits_the_model(self) -> Spec:
        """Packed rows are an encoder-decoder's, whose pointer (a count of source words per row) they would mix."""
        cross = self.model.graph.cross_attention  # an encoder-decoder: packed pairs on both sides
        if self.train.packing and (not cross or self.model.pointer() is not None):
            what = "a pointer (model.decoder.pointer)" if cross else f"model.kind {self.model.kind}"
            raise FieldError(("train", "packing"), f"packed rows are for an encoder-decoder without a pointer, not "
                             f"{what}; set train.packing: false")
        return self

    @model_validator(mode="after")
    def _rdrop_has_dropout(self) -> Spec:
        """R-Drop compares two dropout masks' outputs: with no dropout they are one output, and it only doubles a
        step's work."""
        if self.train.rdrop > 0 and not any(self.model.dropout.model_dump().values()):
            raise FieldError(("train", "rdrop"), "R-Drop compares two passes under different dropout masks, and every "
                             "model.dropout rate is 0: set one (e.g. model.dropout.residual: 0.1) or train.rdrop: 0")
        return self

    @model_validator(mode="after")
    def _pointer_fits_the_data(self) -> Spec:
        """``advance: leaves`` names the data set's leaf tokens: a parsing data set's."""
        pointer = self.model.pointer()
        if pointer is not None and pointer.advance == "leaves" and pointer.advance_ids is None \
                and not _trees(self.data):
            raise FieldError(("model", "decoder", "pointer", "advance"), "leaves are the leaf tokens of a parse "
                             "tree (data.dataset: treebank); for other data list the target tokens that consume "
                             "one source word, e.g. advance: [XX]")
        return self

    @model_validator(mode="after")
    def _task_fits_the_spec(self) -> Spec:
        """The run's task checks the spec: its data fit its model, its metric is one of the task's
        (``TaskDeclaration.check``)."""
        self.declared_task().check(self)
        return self

    def vocab_size(self) -> int:
        """The target (or shared) vocabulary size, resolved from the tokenizer settings if needed."""
        v = self.model.vocab_size
        return self.data.tokenizer.vocab_size if v == "from_tokenizer" else v

    def src_vocab_size(self) -> int:
        return self.model.src_vocab_size or self.vocab_size()

    def special(self) -> Specials:
        """The vocabulary's special ids and adding (``data.tokenizer.special``; tbuild's own by default)."""
        return self.data.tokenizer.special or DEFAULT

    def architecture_hash(self) -> str:
        """Hash of what determines the weights' shapes and meaning: model section and vocabulary."""
        model = _without_late_defaults(self.model.model_dump(mode="json")) | {"vocab_size": self.vocab_size()}
        payload = {"model": model, "vocab": [self.src_vocab_size(), self.vocab_size()]}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]
