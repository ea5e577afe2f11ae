"""EVALB (Sekine & Collins 1997) in pure Python: labelled bracketing recall, precision, F-measure,
complete match, crossing brackets and tagging accuracy, for all sentences and for those up to
CUTOFF_LEN words, with EVALB's parameter files and its printed report, character for character.

It follows ``evalb.c`` (the current one, kept with benepar) rule by rule: a pre-terminal whose tag is
a DELETE_LABEL is removed with its word; other brackets are compared after their label is cut at the
first ``-`` or ``=`` and are dropped if that label is a DELETE_LABEL, or if they span no word; brackets
match as a multiset (each test bracket matches at most one gold bracket); EQ_LABEL and EQ_WORD pairs
are equal; a test line with no words is skipped; a length or word mismatch is an error sentence.
Not reproduced: QUOTE_LABEL (EVALB's misquote repair, used only by nk.prm) is refused, and where
evalb.c has undefined behaviour (a stray word outside brackets loops, an extra close bracket reads
before its stack) this counts an error and goes on.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path

from ...errors import TbuildError

_SPACE = " \t\n\v\f\r"  # C isspace


@dataclass
class Params:
    """What an EVALB parameter file sets (defaults: evalb.c's own)."""

    debug: int = 0
    max_error: int = 10
    cutoff_len: int = 40
    labeled: bool = True
    delete_labels: list[str] = field(default_factory=list)
    delete_labels_for_length: list[str] = field(default_factory=list)
    eq_labels: list[tuple[str, str]] = field(default_factory=list)
    eq_words: list[tuple[str, str]] = field(default_factory=list)

    def label_eq(self, a: str, b: str) -> bool:
        return a == b or (a, b) in self.eq_labels or (b, a) in self.eq_labels

    def word_eq(self, a: str, b: str) -> bool:
        return a == b or (a, b) in self.eq_words or (b, a) in self.eq_words


def collins() -> Params:
    """The parameters of EVALB's ``COLLINS.prm``, which parsing papers (and §6.3's Table 4) report with."""
    return Params(delete_labels=["TOP", "-NONE-", ",", ":", "``", "''", "."], delete_labels_for_length=["-NONE-"],
                  eq_labels=[("ADVP", "PRT")])


def parse_params(text: str, name: str = "parameter file") -> Params:
    """Read an EVALB parameter file: ``KEY value`` lines; ``#`` lines and lines under 3 characters are
    skipped, as evalb.c does. Unknown keys and QUOTE_LABEL are errors naming the line."""
    params = Params()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip(_SPACE)
        if line.startswith("#") or len(line) < 3:
            continue
        cut = next((i for i, ch in enumerate(line) if ch in _SPACE), len(line))
        key, value = line[:cut], line[cut:].lstrip(_SPACE)
        try:
            _set_param(params, key, value)
        except ValueError as e:
            raise TbuildError(f"{name}:{number}: {key}: {e}") from None
    return params


def _set_param(params: Params, key: str, value: str) -> None:
    if key in ("DEBUG", "MAX_ERROR", "CUTOFF_LEN", "LABELED"):
        number = int(value.split()[0]) if value else 0
        setattr(params, {"LABELED": "labeled"}.get(key, key.lower()), bool(number) if key == "LABELED" else number)
    elif key == "DELETE_LABEL":
        params.delete_labels.append(value)
    elif key == "DELETE_LABEL_FOR_LENGTH":
        params.delete_labels_for_length.append(value)
    elif key in ("EQ_LABEL", "EQ_WORD"):
        pair = value.split()
        if len(pair) != 2:
            raise ValueError("requires two values")
        (params.eq_labels if key == "EQ_LABEL" else params.eq_words).append((pair[0], pair[1]))
    elif key == "QUOTE_LABEL":
        raise ValueError("not supported (EVALB's misquote repair)")
    else:
        raise ValueError("unknown keyword")


def read_params(path: Path) -> Params:
    try:
        return parse_params(path.read_text(encoding="utf-8"), str(path))
    except OSError as e:
        raise TbuildError(f"cannot read EVALB parameter file {path}: {e.strerror or e}") from None


class Match(IntEnum):
    """What became of a bracket (evalb.c's codes)."""

    UNMATCHED = 0
    MATCHED = 1
    DELETED = 5


class Status(IntEnum):
    """A sentence's status in the report (evalb.c's codes)."""

    OK = 0
    ERROR = 1
    SKIPPED = 2


@dataclass
class Bracket:
    start: int
    end: int
    label: str
    result: Match = Match.UNMATCHED


@dataclass
class Parsed:
    """One tree as evalb.c reads it: kept terminals (word, tag), brackets over word positions, the
    length (words not in DELETE_LABEL_FOR_LENGTH) and the errors met."""

    terminals: list[tuple[str, str]]
    brackets: list[Bracket]
    length: int
    errors: list[str]


def _token(line: str, p: int) -> int:
    """The end of the token starting at ``p`` (up to a space or a bracket)."""
    while p < len(line) and line[p] not in _SPACE and line[p] not in "()":
        p += 1
    return p


def parse_tree(line: str, params: Params) -> Parsed:
    """Read one bracketed tree the way evalb.c's ``read_line`` does."""
    terminals: list[tuple[str, str]] = []
    brackets: list[Bracket] = []
    stack: list[int] = []
    errors: list[str] = []
    length, p = 0, 0
    while p < len(line):
        c = line[p]
        if c in _SPACE:
            p += 1
        elif c == "(":
            end = _token(line, p + 1)
            label, p = line[p + 1:end], end
            if p < len(line) and line[p] in _SPACE:
                q = p
                while q < len(line) and line[q] in _SPACE:
                    q += 1
                word_end = _token(line, q)
                if word_end < len(line) and line[word_end] == ")":  # a pre-terminal: (TAG word)
                    length += label not in params.delete_labels_for_length
                    if label not in params.delete_labels:
                        terminals.append((line[q:word_end], label))
                    p = word_end + 1
                    continue
                if not (word_end < len(line) and line[word_end] == "("):
                    errors.append("More than two elements in a bracket")
            stack.append(len(brackets))
            brackets.append(Bracket(len(terminals), -1, label))
        elif c == ")":
            if stack:
                brackets[stack.pop()].end = len(terminals)
            else:
                errors.append("Bracketing unbalance (too many close bracket)")
            p += 1
        else:
            errors.append("Reading sentence")
            p = _token(line, p)
    if stack:
        errors.append("Bracketing is unbalanced (too many open bracket)")
    return Parsed(terminals, brackets, length, errors)


@dataclass
class Sentence:
    """One sentence's line of the report."""

    id: int
    length: int
    status: Status
    match: int = 0
    gold: int = 0
    test: int = 0
    crossing: int = 0
    words: int = 0
    correct_tags: int = 0

    def line(self) -> str:
        recall = 100.0 * self.match / self.gold if self.gold else 0.0
        precision = 100.0 * self.match / self.test if self.test else 0.0
        accuracy = 100.0 * self.correct_tags / self.words if self.words else 0.0
        return (f"{self.id:4d}  {self.length:3d}    {self.status:d}  {recall:6.2f} {precision:6.2f}   "
                f"{self.match:3d}    {self.gold:3d}  {self.test:3d}    {self.crossing:3d}"
                f"   {self.words:4d}  {self.correct_tags:4d}   {accuracy:6.2f}")


def _massage(brackets: list[Bracket], params: Params) -> int:
    """Cut labels at '-'/'=' and mark empty or deleted brackets; the number kept."""
    for b in brackets:
        b.result = Match.UNMATCHED
        if b.start == b.end:
            b.result = Match.DELETED
            continue
        for i, ch in enumerate(b.label):
            if ch in "-=":
                b.label = b.label[:i]
                break
        if any(params.label_eq(b.label, d) for d in params.delete_labels):
            b.result = Match.DELETED
    return sum(b.result != Match.DELETED for b in brackets)


def _crosses(g: Bracket, t: Bracket) -> bool:
    return (g.start < t.start < g.end < t.end) or (t.start < g.start < t.end < g.end)


def score_sentence(number: int, gold_line: str, test_line: str, params: Params) -> tuple[Sentence, list[str]]:
    """One line of the report and the errors (evalb.c's stderr messages, without the line number)."""
    gold, test = parse_tree(gold_line, params), parse_tree(test_line, params)
    errors = gold.errors + test.errors
    status = Status.ERROR if errors else Status.OK
    if not test.terminals:
        return Sentence(number, gold.length, Status.SKIPPED), errors
    if len(gold.terminals) != len(test.terminals):
        errors.append(f"Length unmatch ({len(gold.terminals)}|{len(test.terminals)})")
        return Sentence(number, gold.length, Status.ERROR), errors
    for (w1, _), (w2, _) in zip(gold.terminals, test.terminals, strict=True):
        if not params.word_eq(w1, w2):
            errors.append(f"Words unmatch ({w1}|{w2})")
            return Sentence(number, gold.length, Status.ERROR), errors
    n_gold, n_test = _massage(gold.brackets, params), _massage(test.brackets, params)
    match = 0
    for g in gold.brackets:
        if g.result == Match.DELETED:
            continue
        for t in test.brackets:  # a multiset: each test bracket matches one gold bracket at most
            if t.result == Match.UNMATCHED and (g.start, g.end) == (t.start, t.end) and (
                    not params.labeled or params.label_eq(g.label, t.label)):
                g.result = t.result = Match.MATCHED
                match += 1
                break
    live = [g for g in gold.brackets if g.result != Match.DELETED]
    crossing = sum(any(_crosses(g, t) for g in live) for t in test.brackets if t.result != Match.DELETED)
    tags = sum(params.label_eq(g[1], t[1]) for g, t in zip(gold.terminals, test.terminals, strict=True))
    return Sentence(number, gold.length, status, match, n_gold, n_test, crossing, len(gold.terminals), tags), errors


@dataclass
class Totals:
    """The summary of a set of sentences (all, or those of length <= cutoff)."""

    sentences: int = 0
    errors: int = 0
    skipped: int = 0
    match: int = 0
    gold: int = 0
    test: int = 0
    complete: int = 0
    words: int = 0
    crossing: int = 0
    no_crossing: int = 0
    two_or_less: int = 0
    correct_tags: int = 0

    def add(self, s: Sentence) -> None:
        self.sentences += 1
        if s.status == Status.ERROR:
            self.errors += 1
            return
        if s.status == Status.SKIPPED:
            self.skipped += 1
            return
        self.match, self.gold, self.test = self.match + s.match, self.gold + s.gold, self.test + s.test
        self.complete += s.gold == s.test == s.match
        self.words += s.words
        self.crossing += s.crossing
        self.no_crossing += s.crossing == 0
        self.two_or_less += s.crossing <= 2
        self.correct_tags += s.correct_tags

    @property
    def valid(self) -> int:
        return self.sentences - self.errors - self.skipped

    @property
    def recall(self) -> float:
        return 100.0 * self.match / self.gold if self.gold > 0 else 0.0

    @property
    def precision(self) -> float:
        return 100.0 * self.match / self.test if self.test > 0 else 0.0

    @property
    def fmeasure(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else math.nan

    @property
    def complete_match(self) -> float:
        return 100.0 * self.complete / self.valid if self.valid > 0 else 0.0

    @property
    def average_crossing(self) -> float:
        return self.crossing / self.valid if self.valid > 0 else 0.0

    @property
    def tagging_accuracy(self) -> float:
        return 100.0 * self.correct_tags / self.words if self.words > 0 else 0.0

    def summary(self) -> list[str]:
        valid = self.valid
        rows = [("Number of sentence", f"{self.sentences:6d}"), ("Number of Error sentence", f"{self.errors:6d}"),
                ("Number of Skip  sentence", f"{self.skipped:6d}"), ("Number of Valid sentence", f"{valid:6d}"),
                ("Bracketing Recall", _f(self.recall)), ("Bracketing Precision", _f(self.precision)),
                ("Bracketing FMeasure", _f(self.fmeasure)), ("Complete match", _f(self.complete_match)),
                ("Average crossing", _f(self.average_crossing)),
                ("No crossing", _f(100.0 * self.no_crossing / valid if valid > 0 else 0.0)),
                ("2 or less crossing", _f(100.0 * self.two_or_less / valid if valid > 0 else 0.0)),
                ("Tagging accuracy", _f(self.tagging_accuracy))]
        return [f"{name:<26}= {value}" for name, value in rows]

    def to_json(self) -> dict:
        return {"sentences": self.sentences, "error_sentences": self.errors, "skipped_sentences": self.skipped,
                "valid_sentences": self.valid, "recall": self.recall, "precision": self.precision,
                "f1": 0.0 if math.isnan(self.fmeasure) else self.fmeasure,  # EVALB prints -nan
                "complete_match": self.complete_match,
                "average_crossing": self.average_crossing, "tagging_accuracy": self.tagging_accuracy}


def _f(x: float) -> str:
    return f"{x:6.2f}" if not math.isnan(x) else f"{'-nan':>6}"  # glibc prints 0/0 as -nan


_HEAD = ("  Sent.                        Matched  Bracket   Cross        Correct Tag\n"
         " ID  Len.  Stat. Recal  Prec.  Bracket gold test Bracket Words  Tags Accracy\n" + "=" * 76)


@dataclass
class Evalb:
    """A whole evaluation: every sentence's line, the totals, and EVALB's stderr messages."""

    params: Params
    sentences: list[Sentence] = field(default_factory=list)
    all: Totals = field(default_factory=Totals)
    short: Totals = field(default_factory=Totals)  # length <= params.cutoff_len
    messages: list[str] = field(default_factory=list)

    def listing(self) -> str:
        """The head and one line per sentence scored, each ending in a newline: what evalb has printed
        on stdout when it stops at MAX_ERROR."""
        return "\n".join([_HEAD, *(s.line() for s in self.sentences)]) + "\n"

    def report(self) -> str:
        """What evalb prints on stdout."""
        t = self.all
        total = (f"                {t.recall:6.2f} {t.precision:6.2f} {t.match:6d} {t.gold:5d} {t.test:5d}  "
                 f"{t.crossing:5d}" if t.gold > 0 and t.test > 0 else "")
        total += f"  {t.words:5d} {t.correct_tags:5d}   {t.tagging_accuracy:6.2f}"
        lines = ["=" * 76, total, "=== Summary ===", "", "-- All --", *t.summary(), "",
                 f"-- len<={self.params.cutoff_len} --", *self.short.summary()]
        return self.listing() + "\n".join(lines) + "\n"


class EvalbStopped(TbuildError):
    """More than MAX_ERROR errors: EVALB stops. ``result``: the sentences scored before the stop and
    every message up to it (what evalb has printed by then)."""

    def __init__(self, message: str, result: Evalb) -> None:
        super().__init__(message)
        self.result = result


def evalb(gold: Iterable[str], test: Iterable[str], params: Params | None = None) -> Evalb:
    """Score test trees against gold trees, one tree per line, as ``evalb -p PARAMS GOLD TEST``. More
    than MAX_ERROR errors stop it as they stop EVALB (``EvalbStopped``, with what was scored)."""
    params = params or collins()
    result = Evalb(params)
    gold, test = list(gold), list(test)
    errors = 0

    def error(line: int, message: str) -> None:
        nonlocal errors
        result.messages.append(f"{line} : {message}")
        if errors > params.max_error:  # evalb.c: Error_count++ > Max_error
            raise EvalbStopped(f"EVALB stops at line {line}: more than MAX_ERROR ({params.max_error}) errors, "
                               f"the last: {message}", result)
        errors += 1

    for number, gold_line in enumerate(gold, 1):
        if number > len(test):
            error(number, "Number of lines unmatch (too many lines in gold file)")
            break
        sentence, messages = score_sentence(number, gold_line, test[number - 1], params)
        for message in messages:
            error(number, message)
        result.sentences.append(sentence)
        result.all.add(sentence)
        if sentence.length <= params.cutoff_len:
            result.short.add(sentence)
    if len(test) > len(gold):
        error(len(gold) + 1, "Number of lines unmatch (too many lines in test file)")
    return result


def read_lines(path: Path) -> list[str]:
    """A tree file's lines as EVALB reads them (a last line without a newline counts)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TbuildError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines
