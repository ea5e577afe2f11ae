"""Parity of an exported model (CTranslate2, or a Hugging Face MarianMTModel or PegasusForConditionalGeneration)
with tbuild's own decoding: both decode the same lines at the same beam and length penalty, and both score
the same references teacher-forced. The teacher-forced log-prob difference is the strict check (the same
network must give the same probabilities, up to float32 rounding); the outputs may differ where the searches differ:

- Length penalty: CTranslate2 divides by |Y|^α (|Y| without EOS), HF by |Y|^α (with EOS), tbuild by
  ((5+|Y|)/6)^α with EOS (Wu et al. 2016, engine/decoding/search.py). The check runs both runtimes with
  length penalty 0 (raw log-probs), asks for their ``beam`` finished hypotheses and re-ranks them with
  tbuild's lp (``decoding/ct2.py: ct2_search``, ``decoding/hf.py: hf_search``), so like is compared
  with like; deployed with their own defaults they apply their own formula.
- Stopping: CTranslate2 stops once ``beam`` hypotheses have finished, whatever ``decode.stopping`` says
  (tbuild's ``beam``); HF (early_stopping "never") and tbuild's ``exact`` go on until no live beam can beat
  the finished ones, but tbuild's test uses its lp, so at α > 0 it can still find a better-scoring, longer
  hypothesis; tbuild's ``patience`` lies between (``decoding/search.py``).
- Hypotheses cut at the length limit: tbuild and HF (``decoding/hf.py: RowLimits``) force EOS and score
  it with the model's log p(EOS); CTranslate2 just stops.
Greedy search has none of these: its outputs must be identical. Set in all: PAD and BOS are never
generated, no minimum length, the same maximum length per sentence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from tbuild.builder.spec import DecodeSpec

from ..data.tokenizer import Tokenizer
from ..decoding.ct2 import ct2_search
from ..decoding.hf import hf_search
from ..decoding.native import NativeEngine, encode_sources, translate
from ..decoding.request import DecodeRequest, Hooks
from ..hf.writer import max_length
from ..run.directory import Run

TEACHER_FORCED_LINES = 16  # the batch whose per-token log-probs are compared
SEARCH_DIFFERENCES = {  # one line each for the report (module docstring)
    "ctranslate2": "it stops once beam hypotheses finish; a hypothesis cut at the length limit gets no EOS score",
    "hf": "its finished beams are re-ranked with tbuild's length penalty, but its stopping test uses raw "
          "log-probs, so at α > 0 tbuild may go on to a longer hypothesis",
}


TOLERANCE = 1e-2  # largest |Δ| of a float32 export's log-probs or logits (against tbuild's float32) that passes


def parity_failure(diff: float, quantization: str | None, what: str) -> str | None:
    """Why a float32 export fails its parity check (``diff`` above ``TOLERANCE``), or None (int8: only reported)."""
    if quantization not in (None, "float32") or diff <= TOLERANCE:  # NaN fails too
        return None
    return (f"parity failed: max |Δ {what}| {diff:.2e} is above {TOLERANCE:g}, so the float32 export computes "
            "something else than the run")


@dataclass
class ParityReport:
    sentences: int
    beam: int
    alpha: float
    bleu_tbuild: float
    bleu_export: float
    identical: float  # share of identical output lines at the run's beam
    identical_greedy: float  # the same, both decoding greedily (must be 1.0 up to float ties)
    first_difference: tuple[int, str, str] | None  # (line number, tbuild, export)
    max_logprob_diff: float  # teacher-forced, per target token, over TEACHER_FORCED_LINES lines
    encoded_differently: int = 0  # source lines the export's own tokenizer encodes otherwise than the run (hf)

    @property
    def delta(self) -> float:
        return self.bleu_export - self.bleu_tbuild


class Peer(Protocol):
    """An exported model as the check sees it."""

    def translate(self, translator: NativeEngine, lines: list[str], decode: DecodeSpec) -> list[str]: ...

    def log_probs(self, src_ids: list[list[int]], tgt_ids: list[list[int]]) -> list[torch.Tensor]:
        """Per sentence, log p of each target token then of EOS, teacher-forced (sources as the vocabulary adds
        around them: tbuild's end with EOS)."""
        ...

    def encode(self, translator: NativeEngine, lines: list[str]) -> list[list[int]]:
        """Source ids as the export encodes them (its own tokenizer, where it has one)."""
        ...


@dataclass
class Ct2Peer:
    ct2: Any  # ctranslate2.Translator
    tok: Tokenizer

    def encode(self, translator: NativeEngine, lines: list[str]) -> list[list[int]]:
        """The run's encoding: CTranslate2 reads the run's pieces, it has no tokenizer of its own."""
        return encode_sources(self.tok, lines, translator.max_source_tokens)

    def translate(self, translator: NativeEngine, lines: list[str], decode: DecodeSpec) -> list[str]:
        """The best line each under tbuild's conventions (``decoding/ct2.py``)."""
        sources = self.encode(translator, lines)
        hyps = ct2_search(self.ct2, self.tok, sources, decode, translator.max_output_len)
        return [self.tok.decode(h[0].tokens) if h else "" for h in hyps]

    def log_probs(self, src_ids: list[list[int]], tgt_ids: list[list[int]]) -> list[torch.Tensor]:
        piece, (before, after) = self.tok.sp.id_to_piece, map(len, self.tok.special.around("source"))
        results = self.ct2.score_batch([[piece(i) for i in s[before:len(s) - after]] for s in src_ids],  # the runtime
                                       [[piece(i) for i in t] for t in tgt_ids], max_input_length=0)  # adds those
        return [torch.tensor(r.log_probs) for r in results]


@dataclass
class HFPeer:
    hf: Any  # transformers.MarianMTModel, PegasusForConditionalGeneration or T5ForConditionalGeneration
    tok: Tokenizer
    own: Any  # the folder's tokenizer, as transformers.AutoTokenizer loads it

    def encode(self, translator: NativeEngine, lines: list[str]) -> list[list[int]]:
        """Sources as the folder's own tokenizer encodes them, cut to the run's source limit; an empty line: none."""
        limit = translator.max_source_tokens
        return [self.own(line, truncation=True, max_length=limit)["input_ids"] if line.strip() else []
                for line in lines]

    def translate(self, translator: NativeEngine, lines: list[str], decode: DecodeSpec) -> list[str]:
        """The best line each under tbuild's conventions (``decoding/hf.py``), from the folder's own encoding."""
        sources = self.encode(translator, lines)
        rows = max_length(self.hf)  # the HF tables do not extrapolate as tbuild's (T5's: relative positions)
        cap = min(translator.max_output_len or rows, rows)
        hyps = hf_search(self.hf, sources, decode, cap, self.tok.special)
        return [self.tok.decode(h[0].tokens) if h else "" for h in hyps]

    def log_probs(self, src_ids: list[list[int]], tgt_ids: list[list[int]]) -> list[torch.Tensor]:
        out, special = [], self.tok.special
        for s, t in zip(src_ids, tgt_ids, strict=True):
            with torch.inference_mode():
                tgt_in = torch.tensor([[special.start] + t])
                logits = self.hf(input_ids=torch.tensor([s]), decoder_input_ids=tgt_in).logits
            gold = torch.tensor(t + [special.stop])[:, None]
            out.append(logits[0].float().log_softmax(-1).gather(-1, gold).squeeze(-1))
        return out


def load_hf(folder: Path) -> Any:  # noqa: ANN401 - a transformers PreTrainedModel
    """The Hugging Face export in ``folder`` on the CPU as the class its config.json names (a translator's, a
    language model's, a tagger's, classifier's or masked LM's), in eval mode."""
    import transformers
    from transformers.utils import logging

    logging.set_verbosity_error()  # no load progress bars in the report
    logging.disable_progress_bar()
    cls = transformers.AutoConfig.from_pretrained(str(folder)).architectures[0]
    return getattr(transformers, cls).from_pretrained(str(folder)).eval()


def load_peer(target: str, exported: Path, tok: Tokenizer) -> Peer:
    """The export in ``exported`` loaded on the CPU (float32 unless it was quantized)."""
    if target == "hf":
        from transformers import AutoTokenizer

        return HFPeer(load_hf(exported), tok, AutoTokenizer.from_pretrained(str(exported)))
    import ctranslate2

    return Ct2Peer(ctranslate2.Translator(str(exported), device="cpu"), tok)


def teacher_forced_diff(peer: Peer, translator: NativeEngine, sources: list[str], references: list[str]) -> float:
    """Largest |log p_tbuild - log p_export| over every reference token (EOS included)."""
    tok, model = translator.tokenizer, translator.model
    pairs = [(s, r) for s, r in zip(sources, references, strict=True) if s.strip() and r.strip()]
    pairs = pairs[:TEACHER_FORCED_LINES]
    if not pairs:
        return 0.0
    limit = translator.max_source_tokens
    src_ids = encode_sources(tok, [s for s, _ in pairs], limit)
    tgt_ids = [ids[: limit - 1] for ids in tok.encode([r for _, r in pairs])]
    worst, special = 0.0, tok.special
    device = translator.policy.device
    for s, t, theirs in zip(src_ids, tgt_ids, peer.log_probs(src_ids, tgt_ids), strict=True):
        with torch.no_grad():
            logits = model(torch.tensor([s], device=device), torch.tensor([[special.start] + t], device=device))
        gold = torch.tensor(t + [special.stop], device=device)
        ours = logits[0].float().log_softmax(-1).gather(-1, gold[:, None]).squeeze(-1).cpu()
        worst = max(worst, (ours - theirs).abs().max().item())
    return worst


def _outputs(translator: NativeEngine, peer: Peer, sources: list[str], decode: DecodeSpec,
             after_batch: Callable[[], None]) -> tuple[list[str], list[str]]:
    """The best line each from tbuild and from the export."""
    hyps = translate(translator, sources, DecodeRequest.of(decode), Hooks(after_batch=after_batch))
    ours = [translator.tokenizer.decode(h[0].tokens) if h else "" for h in hyps]
    return ours, peer.translate(translator, sources, decode)


def _share(ours: list[str], theirs: list[str]) -> float:
    return sum(a == b for a, b in zip(ours, theirs, strict=True)) / max(1, len(ours))


def check_parity(run: Run, translator: NativeEngine, exported: Path, sources: list[str],
                 references: list[str], *, target: str = "ctranslate2",
                 after_batch: Callable[[], None] = lambda: None) -> ParityReport:
    """Decode ``sources`` with tbuild and the ``target`` export at the run's beam and α, and greedily; compare."""
    import sacrebleu

    decode = run.spec.decode
    peer = load_peer(target, exported, translator.tokenizer)
    ours, theirs = _outputs(translator, peer, sources, decode, after_batch)
    greedy = _share(ours, theirs)
    if decode.beam > 1:
        greedy = _share(*_outputs(translator, peer, sources, decode.model_copy(update={"beam": 1, "nbest": 1}),
                                  after_batch))
    first = next(((i + 1, a, b) for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b), None)
    run_ids = encode_sources(translator.tokenizer, sources, translator.max_source_tokens)
    differently = sum(a != b for a, b in zip(run_ids, peer.encode(translator, sources), strict=True))
    return ParityReport(
        sentences=len(sources), beam=decode.beam, alpha=decode.alpha,
        bleu_tbuild=sacrebleu.corpus_bleu(ours, [references]).score,
        bleu_export=sacrebleu.corpus_bleu(theirs, [references]).score,
        identical=_share(ours, theirs), identical_greedy=greedy, first_difference=first,
        max_logprob_diff=teacher_forced_diff(peer, translator, sources, references), encoded_differently=differently,
    )


def encoding_failure(differently: int, of: int, what: str) -> str | None:
    """Why an export fails its parity check for its tokenizer (it encodes some ``what`` otherwise), or None."""
    if not differently:
        return None
    return f"parity failed: the export's own tokenizer encodes {differently} of {of} {what} otherwise than the run"


PARITY_FILE = "parity.json"


def save_parity(report: object, folder: Path, name: str = PARITY_FILE) -> None:
    """A parity report (a dataclass) as ``folder/name``: a translator's ``parity.json``, which the model card reads,
    or a decoder-only or encoder-only model's ``graph-parity.json``."""
    import dataclasses
    import json

    from ..files import atomic_write

    atomic_write(folder / name, (json.dumps(dataclasses.asdict(report), indent=2) + "\n").encode())
