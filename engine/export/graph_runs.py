"""``tbuild export`` of a decoder-only or encoder-only run: write it for the target (``hf_graphs.py``,
``ct2_graphs.py``), then check parity on the validation split (``graph_parity.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..data.masked import masked_lm
from ..decoding.lm import load_language_model
from ..decoding.tagger import load_tagger
from ..decoding.translator import Translator, load_translator
from ..extras import require
from ..run_dir import Run
from .graph_parity import GraphParity, check_lm, check_tagger, save_graph_parity
from .targets import TARGETS, check_exportable


def export_graph(run: Run, to: str, out: Path, *, quantization: str | None = None, checkpoint: Path | None = None,
                 average: int | None = None) -> str:
    """Write ``run``'s model for ``to`` (hf or ctranslate2) into ``out``; returns which weights."""
    from tbuild.builder import build_model

    from ..data.tokenizer import Tokenizer
    from ..weights import load_weights
    from .ct2_graphs import write_ct2_graph
    from .hf_graphs import write_hf_graph

    check_exportable(run.spec, TARGETS[to])  # refuse before loading anything
    require("transformers", "tbuild[export]", f"--to {to}")
    if to == "ctranslate2":
        require("ctranslate2", "tbuild[export]", f"--to {to}")
    tok = Tokenizer.load(run.tokenizer)
    model = build_model(run.spec)
    weights = load_weights(model, run, checkpoint=checkpoint, average=average)
    vocabulary = [tok.sp.id_to_piece(i) for i in range(tok.vocab_size)]
    if to == "hf":
        write_hf_graph(model.eval(), run.spec, tok.path, vocabulary, out)
    else:
        write_ct2_graph(model.eval(), run.spec, vocabulary, out, quantization or "float32")
    return weights


def load_peer(to: str, out: Path):  # noqa: ANN201 - a transformers model or a ctranslate2.Generator
    """The export in ``out`` on the CPU, as its runtime loads it."""
    if to == "ctranslate2":
        import ctranslate2

        return ctranslate2.Generator(str(out), device="cpu")
    import transformers
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()
    if _lm(out):
        return transformers.AutoModelForCausalLM.from_pretrained(str(out)).eval()
    cls = transformers.AutoConfig.from_pretrained(str(out)).architectures[0]  # a tagger, classifier or masked LM
    return getattr(transformers, cls).from_pretrained(str(out)).eval()


def _lm(out: Path) -> bool:
    return (out / "generation_config.json").is_file()


def graph_parity(run: Run, to: str, out: Path, *, checkpoint: Path | None = None, average: int | None = None,
                 device: str = "cpu", notify: Callable[[str], None] = lambda _: None) -> GraphParity:
    """Compare the export in ``out`` with tbuild on the validation split; the report is also saved there."""
    from ..data.datasets import read_split

    peer = load_peer(to, out)
    if run.spec.model.kind == "decoder_only":
        lm = load_language_model(run, checkpoint=checkpoint, average=average, device=device, notify=notify)
        _, lines = read_split(run.spec.data, "valid", lambda _: None)
        report = check_lm(lm, peer, lines, to, run.spec.decode)
    else:
        masked = masked_lm(run.spec)  # no labels: loaded as any encoder-only model
        load = load_translator if masked else load_tagger
        t = load(run, checkpoint=checkpoint, average=average, device=device, notify=notify)
        rows = _encoder_rows(run, t, masked)
        limit = t.max_output_len or len(max(rows, key=len))
        report = check_tagger(t, peer, [r[:limit] for r in rows if r])
    save_graph_parity(report, out)
    return report


def _encoder_rows(run: Run, t: Translator, masked: bool) -> list[list[int]]:
    """The valid split's rows as the encoder-only model reads them: a tagger's words' pieces (compared at
    every piece), a classifier's BOS-pieces-EOS rows, a masked LM's lines (unmasked)."""
    from ..data.classified import classifier, read_classified, text_rows
    from ..data.datasets import read_split
    from ..data.masked import line_rows
    from ..data.tagged import read_tagged, word_piece, word_pieces, word_row

    if masked:
        return line_rows(t.tokenizer, read_split(run.spec.data, "valid", lambda _: None)[1], t.max_output_len)
    if classifier(run.spec):
        return text_rows(t.tokenizer, read_classified(run.spec.data, "valid").texts, t.max_output_len)
    pieces = word_pieces(t.tokenizer, read_tagged(run.spec.data, "valid").words)
    return [word_row(p, word_piece(run.spec))[0] for p in pieces]
