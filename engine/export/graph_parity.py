"""Parity of a decoder-only or encoder-only export with tbuild: the largest logit (or, through CTranslate2,
log-prob) difference on sample inputs, and the greedy continuations of prompts or the predicted labels. Both
sides read the run's ids, never emit its pad or start, stop at EOS and take the same number of new tokens, so
greedy outputs must be identical (up to float ties)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from tbuild.builder.spec import DecodeSpec

from ..decoding.lm import LanguageModel, generate, prompt_ids
from ..decoding.native import NativeEngine, padded
from ..decoding.request import DecodeRequest
from .graph_targets import TABLE_ROWS

if TYPE_CHECKING:
    from ctranslate2 import Generator
    from transformers import PreTrainedModel

SAMPLE_LINES = 16  # the lines whose logits are compared
PROMPTS = 8  # the prompts continued greedily
PROMPT_TOKENS = 3  # each prompt: the first pieces of a line
NEW_TOKENS = 12


@dataclass
class GraphParity:
    target: str
    lines: int  # sample lines compared (logits or log-probs)
    max_logit_diff: float  # hf: logits; ctranslate2: log-probs of each next token
    outputs: int  # prompts continued, or label positions predicted
    identical: float  # share of identical greedy continuations, or of identical labels
    encoded_differently: int = 0  # prompts the export's own tokenizer encodes otherwise than the run (hf)

    def lines_out(self) -> list[str]:
        what = "greedy continuations" if self.target != "labels" else "predicted labels"
        return [f"max |Δ logit| on {self.lines} lines: {self.max_logit_diff:.2e}",
                f"{what} identical: {100 * self.identical:.1f}% of {self.outputs}",
                *([f"prompts the export's own tokenizer encodes otherwise: {self.encoded_differently}"]
                  if self.encoded_differently else [])]


def sample_rows(lm: LanguageModel, lines: list[str]) -> list[list[int]]:
    """The start (BOS) and each non-empty line's pieces, cut to the model's positions."""
    limit = (lm.max_positions or TABLE_ROWS) - 1
    kept = [line for line in lines if line.strip()][:SAMPLE_LINES]
    start = lm.translator.tokenizer.special.start
    return [[start] + ids[:limit] for ids in lm.translator.tokenizer.encode(kept)]


def lm_logit_diff(lm: LanguageModel, peer: PreTrainedModel | Generator, rows: list[list[int]], target: str) -> float:
    """Largest difference of the peer's logits (hf) or next-token log-probs (ctranslate2) from tbuild's."""
    model, worst = lm.translator.model.eval(), 0.0
    for row in rows:
        ids = torch.tensor([row])
        with torch.no_grad():
            ours = model.decode(ids.to(lm.translator.policy.device))[0].float().cpu()
            if target == "hf":
                theirs = peer(input_ids=ids).logits[0].float()
            else:
                pieces = [lm.translator.tokenizer.sp.id_to_piece(i) for i in row]
                theirs = torch.tensor(peer.score_batch([pieces])[0].log_probs)
                ours = ours[:-1].log_softmax(-1).gather(-1, ids[0, 1:, None]).squeeze(-1)
        worst = max(worst, (ours - theirs).abs().max().item())
    return worst


def peer_continuations(peer: PreTrainedModel | Generator, prompts: list[list[int]], target: str,
                       vocabulary: list[str], lm: LanguageModel) -> list[list[int]]:
    """Each prompt (as generate reads it: ``prompt_ids``) with its greedy continuation, the special ids text
    leaves out dropped."""
    out, special = [], lm.translator.tokenizer.special
    banned = special.generating().never  # what tbuild's search bans
    for prompt in prompts:
        if target == "hf":
            ids = peer.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                                max_new_tokens=NEW_TOKENS, do_sample=False, num_beams=1)[0].tolist()
        else:
            # CTranslate2's max_length counts the prompt's pieces after the start
            result = peer.generate_batch([[vocabulary[i] for i in prompt]], max_length=len(prompt) - 1 + NEW_TOKENS,
                                         sampling_topk=1, include_prompt_in_result=True,
                                         end_token=vocabulary[special.stop],
                                         suppress_sequences=[[vocabulary[i]] for i in banned] or None)
            ids = result[0].sequences_ids[0]
        out.append([i for i in ids if i not in special.skipped])
    return out


def check_lm(lm: LanguageModel, peer: PreTrainedModel | Generator, lines: list[str], target: str,
             decode: DecodeSpec, own: Callable[[str], list[int]] | None = None) -> GraphParity:
    """Logit difference on the sample lines, then greedy continuations of their first pieces at beam 1, the
    peer's prompts encoded by ``own`` (the export's own tokenizer) else as tbuild's generate encodes them."""
    rows = sample_rows(lm, lines)
    diff = lm_logit_diff(lm, peer, rows, target)
    prompts = [r[:PROMPT_TOKENS + 1] for r in rows[:PROMPTS]]
    tok = lm.translator.tokenizer
    texts = [tok.decode(p[1:]) for p in prompts]
    request = DecodeRequest.of(decode.model_copy(update={"beam": 1, "nbest": 1}))
    skipped = tok.special.skipped  # as peer_continuations leaves them out (an imported Llama may emit BOS)
    ours = [[i for i in h[0].tokens if i not in skipped] if h else [] for h in generate(lm, texts, request, NEW_TOKENS)]
    prompts = [prompt_ids(tok.special, tok.encode([t])[0]) for t in texts]  # as generate encodes them
    given = prompts if own is None else [own(t) for t in texts]
    theirs = peer_continuations(peer, given, target, [tok.sp.id_to_piece(i) for i in range(tok.vocab_size)], lm)
    same = sum(a == b for a, b in zip(ours, theirs, strict=True))
    differently = sum(a != b for a, b in zip(prompts, given, strict=True))
    return GraphParity(target, len(rows), diff, len(prompts), same / max(1, len(prompts)), differently)


def check_tagger(t: NativeEngine, hf: PreTrainedModel, rows: list[list[int]]) -> GraphParity:
    """Logit difference and identical labels at every non-padding position of ``rows`` (batched): a tagger's
    and a masked LM's at each position, a classifier's once per row."""
    worst, same, total = 0.0, 0, 0
    model = t.model.eval()
    for start in range(0, len(rows), SAMPLE_LINES):
        src, pad = padded(rows[start:start + SAMPLE_LINES], t.tokenizer.special.fill)
        keep = ~pad
        with torch.no_grad():
            ours = model(t.policy.to_device(src), None, t.policy.to_device(pad)).float().cpu()
            theirs = hf(input_ids=src, attention_mask=keep.long()).logits.float()
        if ours.size(1) == 1:  # a sequence classifier: one score row per input
            keep, theirs = keep[:, :1], theirs.unsqueeze(1)
        worst = max(worst, (ours - theirs)[keep].abs().max().item())
        same += int((ours.argmax(-1) == theirs.argmax(-1))[keep].sum())
        total += int(keep.sum())
    return GraphParity("labels", len(rows), worst, total, same / max(1, total))


PARITY_FILE = "graph-parity.json"  # not parity.json: the model card's table is a translator's (BLEU)
