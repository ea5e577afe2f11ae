"""``tbuild export`` to a Hugging Face folder (``engine/hf/writer.py``: a translator's Marian or Pegasus class, a
decoder-only or encoder-only model's own), and of a decoder-only run to CTranslate2 (``ct2_graphs.py``); then
the parity check of a decoder-only or encoder-only export on the validation split (``graph_parity.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tbuild.builder.resolved import resolve

from ..decoding.lm import load_language_model
from ..decoding.tagger import load_tagger
from ..decoding.translator import Translator
from ..extras import require
from ..hf.writer import load_for_hf, write_hf
from ..run.directory import TOKENIZERS_FILE, Run
from .graph_parity import GraphParity, check_lm, check_tagger, save_graph_parity
from .graph_targets import check_graph
from .targets import HF, TARGETS, check_exportable, hf_seq2seq_class

if TYPE_CHECKING:
    from ctranslate2 import Generator
    from transformers import PreTrainedModel


def export_graph(run: Run, to: str, out: Path, *, bos_first: bool, quantization: str | None = None,
                 checkpoint: Path | None = None, average: int | None = None) -> str:
    """Write ``run``'s model for ``to`` (hf or ctranslate2) into ``out`` (``bos_first``: whether its task's
    rows start with BOS); returns which weights."""
    from .ct2_graphs import write_ct2_graph

    model, tok, weights = load_for_hf(run, lambda: check_exportable(run.spec, TARGETS[to]), checkpoint, average, to)
    key = check_graph(run.spec, resolve(run.spec.model), to, lambda what: None)  # the class: the check's choice
    if to == "hf":
        write_hf(model, run.spec, key, tok, out, bos_first=bos_first)
    else:
        require("ctranslate2", "tbuild[export]", f"--to {to}")
        write_ct2_graph(model, run.spec, key, [tok.sp.id_to_piece(i) for i in range(tok.vocab_size)], out,
                        quantization or "float32")
    return weights


def export_translator(run: Run, out: Path, *, checkpoint: Path | None = None, average: int | None = None) -> str:
    """Write a translator's weights (``load_weights``: a checkpoint, an average or the default) as a
    MarianMTModel (post-norm) or PegasusForConditionalGeneration (pre-norm) folder in ``out``; returns which
    weights."""
    model, tok, weights = load_for_hf(run, lambda: check_exportable(run.spec, HF), checkpoint, average)
    write_hf(model, run.spec, hf_seq2seq_class(run.spec), tok, out)
    return weights


def load_peer(to: str, out: Path) -> PreTrainedModel | Generator:
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


def _own_tokenizer(out: Path) -> Callable[[str], list[int]] | None:
    """``tok(text)``'s ids of the export's own tokenizer where it is a tokenizers file (an imported run's), which
    transformers reads as it is; None for a sentencepiece model with tbuild's record (docs/export.md)."""
    if not (out / TOKENIZERS_FILE).is_file():
        return None
    from transformers import AutoTokenizer

    own = AutoTokenizer.from_pretrained(str(out))
    return lambda text: list(own(text)["input_ids"])


def _lm(out: Path) -> bool:
    return (out / "generation_config.json").is_file()


def lm_parity(run: Run, to: str, out: Path, *, checkpoint: Path | None = None, average: int | None = None,
              device: str = "cpu", notify: Callable[[str], None] = lambda _: None) -> GraphParity:
    """Compare a language model's export in ``out`` with tbuild on the validation split's lines (greedy
    continuations and next-token scores); the report is also saved there."""
    from ..data.datasets import read_split

    peer = load_peer(to, out)
    lm = load_language_model(run, checkpoint=checkpoint, average=average, device=device, notify=notify)
    _, lines = read_split(run.spec.data, "valid", lambda _: None)
    report = check_lm(lm, peer, lines, to, run.spec.decode, _own_tokenizer(out) if to == "hf" else None)
    save_graph_parity(report, out)
    return report


def encoder_parity(run: Run, to: str, out: Path, rows_of: Callable[[Translator], list[list[int]]], *,
                   load: Callable[..., Translator] = load_tagger, checkpoint: Path | None = None,
                   average: int | None = None, device: str = "cpu",
                   notify: Callable[[str], None] = lambda _: None) -> GraphParity:
    """Compare an encoder-only export in ``out`` with tbuild on the rows the run's task reads from its
    validation split (``rows_of`` the loaded model: a tagger's words' pieces, a classifier's lines, a
    masked LM's lines), the scores at every position; the report is also saved there."""
    peer = load_peer(to, out)
    t = load(run, checkpoint=checkpoint, average=average, device=device, notify=notify)
    rows = rows_of(t)
    limit = t.max_output_len or len(max(rows, key=len))
    report = check_tagger(t, peer, [r[:limit] for r in rows if r])
    save_graph_parity(report, out)
    return report

