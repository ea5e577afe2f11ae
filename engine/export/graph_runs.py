"""``tbuild export`` to a Hugging Face folder (``engine/hf/writer.py``) and of a decoder-only run to CTranslate2
(``ct2_graphs.py``); then the parity check of a decoder-only or encoder-only export (``graph_parity.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tbuild.builder.resolved import resolve

from ..decoding.lm import load_language_model
from ..decoding.native import NativeEngine
from ..decoding.tagger import load_tagger
from ..extras import require
from ..hf.writer import load_for_hf, write_hf
from ..run.directory import TOKENIZERS_FILE, Run
from .graph_parity import PARITY_FILE, GraphParity, check_lm, check_tagger
from .parity import load_hf, save_parity
from .targets import HF, TARGETS, check_exportable, export_class, hf_seq2seq_class

if TYPE_CHECKING:
    from ctranslate2 import Generator
    from transformers import PreTrainedModel


def export_graph(run: Run, to: str, out: Path, *, bos_first: bool, quantization: str | None = None,
                 checkpoint: Path | None = None, average: int | None = None) -> str:
    """Write ``run``'s model for ``to`` into ``out`` (``bos_first``: its task's rows start with BOS); returns which
    weights."""
    from .ct2_graphs import write_ct2_graph

    model, tok, weights = load_for_hf(run, lambda: check_exportable(run.spec, TARGETS[to]), checkpoint, average, to)
    key = export_class(run.spec, resolve(run.spec.model), to, lambda what: None)  # the class: the check's choice
    if to == "hf":
        write_hf(model, run.spec, key, tok, out, bos_first=bos_first)
    else:
        require("ctranslate2", "tbuild[export]", f"--to {to}")
        write_ct2_graph(model, run.spec, key, [tok.sp.id_to_piece(i) for i in range(tok.vocab_size)], out,
                        quantization or "float32")
    return weights


def export_translator(run: Run, out: Path, *, checkpoint: Path | None = None, average: int | None = None) -> str:
    """Write a translator's weights as the Hugging Face class ``hf_seq2seq_class`` picks; returns which weights."""
    model, tok, weights = load_for_hf(run, lambda: check_exportable(run.spec, HF), checkpoint, average)
    write_hf(model, run.spec, hf_seq2seq_class(run.spec), tok, out)
    return weights


def load_peer(to: str, out: Path) -> PreTrainedModel | Generator:
    """The export in ``out`` on the CPU, as its runtime loads it."""
    if to == "ctranslate2":
        import ctranslate2

        return ctranslate2.Generator(str(out), device="cpu")
    return load_hf(out)


def _own_tokenizer(out: Path) -> Callable[[str], list[int]] | None:
    """The export's own tokenizer where it is a tokenizers file, which transformers reads as it is (docs/export.md)."""
    if not (out / TOKENIZERS_FILE).is_file():
        return None
    from transformers import AutoTokenizer

    own = AutoTokenizer.from_pretrained(str(out))
    return lambda text: list(own(text)["input_ids"])


def lm_parity(run: Run, to: str, out: Path, *, checkpoint: Path | None = None, average: int | None = None,
              device: str = "cpu", notify: Callable[[str], None] = lambda _: None) -> GraphParity:
    """Compare a language model's export in ``out`` with tbuild on the validation lines; saved there too."""
    from ..data.datasets import read_split

    peer = load_peer(to, out)
    lm = load_language_model(run, checkpoint=checkpoint, average=average, device=device, notify=notify)
    _, lines = read_split(run.spec.data, "valid", lambda _: None)
    report = check_lm(lm, peer, lines, to, run.spec.decode, _own_tokenizer(out) if to == "hf" else None)
    save_parity(report, out, PARITY_FILE)
    return report


def encoder_parity(run: Run, to: str, out: Path, rows_of: Callable[[NativeEngine], list[list[int]]], *,
                   load: Callable[..., NativeEngine] = load_tagger, checkpoint: Path | None = None,
                   average: int | None = None, device: str = "cpu",
                   notify: Callable[[str], None] = lambda _: None) -> GraphParity:
    """Compare an encoder-only export in ``out`` with tbuild on the validation rows ``rows_of`` the loaded model
    gives, the scores at every position; the report is also saved there."""
    peer = load_peer(to, out)
    t = load(run, checkpoint=checkpoint, average=average, device=device, notify=notify)
    rows = rows_of(t)
    limit = t.max_output_len or len(max(rows, key=len))
    report = check_tagger(t, peer, [r[:limit] for r in rows if r])
    save_parity(report, out, PARITY_FILE)
    return report

