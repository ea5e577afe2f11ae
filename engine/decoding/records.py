"""What ``tbuild decode`` reads and writes besides plain lines: tab-separated columns (source, target
prefix) and one JSON object per line (``--format jsonl``)."""

from __future__ import annotations

import json

from ..data.tokenizer import Tokenizer
from ..errors import TbuildError
from .search import Hypothesis

FORMATS = ("text", "jsonl")


def split_columns(lines: list[str], name: str) -> tuple[list[str], list[str] | None]:
    """Sources and, when any line has a second tab-separated column, each line's target prefix ("" for
    none). A third column is refused in one line naming it."""
    columns = [line.split("\t") for line in lines]
    for n, parts in enumerate(columns, 1):
        if len(parts) > 2:
            raise TbuildError(f"{name}: line {n} has {len(parts)} tab-separated columns; decode reads a source "
                              "and a target prefix")
    if all(len(parts) == 1 for parts in columns):
        return lines, None
    return [parts[0].strip() for parts in columns], [parts[1].strip() if len(parts) > 1 else "" for parts in columns]


def read_prefixes(data: bytes, name: str, count: int) -> list[str]:
    """``--prefix-file``: one target prefix per input line (empty: none)."""
    from .translator import decode_lines

    prefixes = decode_lines(data, name)
    if len(prefixes) != count:
        raise TbuildError(f"{name}: {len(prefixes)} prefixes for {count} input lines")
    return prefixes


def text_lines(tok: Tokenizer, results: list[list[Hypothesis]], nbest: int) -> list[str]:
    """The plain output: the best translation per line, or ``i ||| text ||| score`` for each of the n best."""
    out: list[str] = []
    for i, hyps in enumerate(results):
        if nbest == 1:
            out.append(tok.decode(hyps[0].tokens) if hyps else "")
        else:
            out.extend(f"{i} ||| {tok.decode(h.tokens)} ||| {h.score:.4f}" for h in hyps)
            if not hyps:
                out.append(f"{i} |||  ||| 0.0000")
    return out


def jsonl_line(tok: Tokenizer, source: str, hyps: list[Hypothesis], alignment: list[int] | None = None) -> str:
    """One JSON object: the source, the best output with its sentence log-probability (``score``, EOS
    step included), its length-normalised score log P / lp(|Y|) (§6.1), its tokens and their
    log-probabilities (EOS last), the n-best list and, when given, a source position per output token."""
    def entry(h: Hypothesis) -> dict:
        return {"output": tok.decode(h.tokens), "score": h.log_prob, "normalized_score": h.score,
                "tokens": [tok.sp.id_to_piece(t) for t in h.tokens] + ["</s>"],
                "token_log_probs": h.token_log_probs}

    best = entry(hyps[0]) if hyps else {"output": "", "score": 0.0, "normalized_score": 0.0, "tokens": [],
                                         "token_log_probs": []}
    record = {"source": source, **best, "nbest": [entry(h) for h in hyps]}
    if alignment is not None:
        record["alignment"] = alignment
    return json.dumps(record, ensure_ascii=False)
