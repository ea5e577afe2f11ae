"""The model kinds (graphs) a spec declares with ``model.kind``: which stacks each has, whether its
decoder attends to an encoder (cross-attention, §3.2.3), and what it trains on. Torch-free: the schema
validates ``model.kind`` against this table and the builder looks up each kind's assembly by the same
key (``tbuild.builder.build.ASSEMBLY``), so a new kind is one entry here and one assembly there.

A stack named ``decoder`` attends causally (masked self-attention, §3.2.3); one named ``encoder``
attends to the whole input. A kind whose stacks end with the encoder has an output head (``model.head``)
instead of a decoder's output projection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Graph:
    """One model kind: its stacks (input side first), whether the decoder layers attend to an encoder's
    output, and its data: ``pairs`` (source → target), ``text`` (one side: a language model) or ``labels``
    (an input and its labels: one per word, a tagger's; or one per line, a classifier's)."""

    kind: str
    stacks: tuple[str, ...]
    cross_attention: bool
    data: Literal["pairs", "text", "labels"]
    summary: str

    def reads(self, head_reads_text: bool, prefix: bool) -> Literal["pairs", "text", "labels"]:
        """What a model of this kind trains on: its data, except source-target pairs for a prefix LM (``prefix``)
        and plain text for a head that reads text (a masked LM's)."""
        return "pairs" if prefix else "text" if head_reads_text else self.data


GRAPHS: dict[str, Graph] = {}


def declare(graph: Graph) -> Graph:
    """Add a model kind to the table (a kind is declared once)."""
    if graph.kind in GRAPHS:
        raise ValueError(f"model kind {graph.kind!r} is already declared")
    GRAPHS[graph.kind] = graph
    return graph


ENCODER_DECODER = declare(Graph(
    "encoder_decoder", ("encoder", "decoder"), cross_attention=True, data="pairs",
    summary="§3.1, Figure 1: an encoder over the source, a decoder over the target attending to it"))
DECODER_ONLY = declare(Graph(
    "decoder_only", ("decoder",), cross_attention=False, data="text",
    summary="a causal language model: one stack of masked self-attention and feed-forward layers, no encoder"))
ENCODER_ONLY = declare(Graph(
    "encoder_only", ("encoder",), cross_attention=False, data="labels",
    summary="an encoder over the input and a head over its final states (model.head: a tagger's "
    "token_classification or a classifier's sequence_classification), no decoder"))


def with_article(kind: str) -> str:
    """A model kind in a sentence: ``an encoder_decoder``, ``a decoder_only``."""
    return f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind}"
