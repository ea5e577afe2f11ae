"""What ``tbuild decode`` reads and writes besides plain lines: tab-separated columns (source, target
prefix, lexical constraints), a constraints file, and one JSON object per line (``--format jsonl``)."""

from __future__ import annotations

import json

from ..data.tokenizer import Tokenizer
from ..errors import TbuildError
from .request import FORMATS, LineConstraints
from .search import Hypothesis

__all__ = ["FORMATS", "jsonl_line", "one_line", "read_constraints", "read_prefixes", "split_columns", "text_lines"]

PHRASES = "|||"  # separates the phrases of a constraints column
_BREAKS = str.maketrans({"\n": "\\n", "\r": "\\r"})  # what ends a line (\n, \r\n, \r: Python's universal newlines)


def one_line(text: str) -> str:
    """``text`` on one line: each newline or carriage return in it (a tokenizers file can decode one) written as
    its escape, ``\\n``, ``\\r``, so a text output keeps one line per input (``--format jsonl`` keeps the text
    exact). Other characters ``str.splitlines`` breaks at (``\\x1d``, ``\\u2028``) end no line in a file."""
    return text.translate(_BREAKS)


def split_columns(lines: list[str], name: str
                  ) -> tuple[list[str], list[str] | None, list[LineConstraints] | None]:
    """Sources and, when any line has more tab-separated columns, each line's target prefix (column 2,
    "" for none) and lexical constraints (column 3: phrases the output must contain, column 4: phrases
    it must not contain; phrases separated by ``|||``). A fifth column is refused in one line."""
    columns = [line.split("\t") for line in lines]
    for n, parts in enumerate(columns, 1):
        if len(parts) > 4:
            raise TbuildError(f"{name}: line {n} has {len(parts)} tab-separated columns; decode reads a source, "
                              f"a target prefix, phrases to include and phrases to exclude")
    width = max((len(parts) for parts in columns), default=1)
    if width == 1:
        return lines, None, None
    cells = [[c.strip() for c in parts] + [""] * (4 - len(parts)) for parts in columns]
    prefixes = [row[1] for row in cells]
    if width == 2:
        return [row[0] for row in cells], prefixes, None
    constraints = [LineConstraints(_phrases(row[2], name, n), _phrases(row[3], name, n))
                   for n, row in enumerate(cells, 1)]
    return [row[0] for row in cells], prefixes if any(prefixes) else None, constraints


def _phrases(cell: str, name: str, line: int) -> tuple[str, ...]:
    if not cell:
        return ()
    phrases = tuple(p.strip() for p in cell.split(PHRASES))
    if not all(phrases):
        raise TbuildError(f"{name}: line {line}: an empty constraint phrase (phrases are separated by {PHRASES})")
    return phrases


def read_constraints(data: bytes, name: str, count: int) -> list[LineConstraints]:
    """``--constraints-file``: one JSON object per input line, ``{"include": [phrases], "exclude":
    [phrases]}`` (either key may be left out; an empty line: no constraints)."""
    from .native import decode_lines

    lines = decode_lines(data, name)
    if len(lines) != count:
        raise TbuildError(f"{name}: {len(lines)} lines of constraints for {count} input lines")
    out = []
    for n, line in enumerate(lines, 1):
        try:
            record = json.loads(line) if line else {}
        except ValueError as e:
            raise TbuildError(f"{name}: line {n} is not JSON ({e.msg})") from None
        if not isinstance(record, dict) or set(record) - {"include", "exclude"}:
            raise TbuildError(f'{name}: line {n}: expected {{"include": [...], "exclude": [...]}}')
        kinds = [record.get(key, []) for key in ("include", "exclude")]
        if not all(isinstance(k, list) and all(isinstance(p, str) and p.strip() for p in k) for k in kinds):
            raise TbuildError(f"{name}: line {n}: include and exclude must be lists of non-empty phrases")
        out.append(LineConstraints(*(tuple(p.strip() for p in k) for k in kinds)))
    return out


def read_prefixes(data: bytes, name: str, count: int) -> list[str]:
    """``--prefix-file``: one target prefix per input line (empty: none)."""
    from .native import decode_lines

    prefixes = decode_lines(data, name)
    if len(prefixes) != count:
        raise TbuildError(f"{name}: {len(prefixes)} prefixes for {count} input lines")
    return prefixes


def text_lines(tok: Tokenizer, results: list[list[Hypothesis]], nbest: int) -> list[str]:
    """The plain output: the best translation per line, or ``i ||| text ||| score`` for each of the n best; each
    on one line (``one_line``)."""
    out: list[str] = []
    for i, hyps in enumerate(results):
        if nbest == 1:
            out.append(one_line(tok.decode(hyps[0].tokens)) if hyps else "")
        else:
            out.extend(f"{i} ||| {one_line(tok.decode(h.tokens))} ||| {h.score:.4f}" for h in hyps)
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
                "token_log_probs": h.token_log_probs, "constraints_met": h.complete}

    best = entry(hyps[0]) if hyps else {"output": "", "score": 0.0, "normalized_score": 0.0, "tokens": [],
                                         "token_log_probs": [], "constraints_met": True}
    record = {"source": source, **best, "nbest": [entry(h) for h in hyps]}
    if alignment is not None:
        record["alignment"] = alignment
    return json.dumps(record, ensure_ascii=False)
