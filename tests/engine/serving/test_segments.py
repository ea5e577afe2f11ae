"""Splitting a line longer than the model's positions (engine/serving/segments.py): whole sentences first,
then words, then characters; nothing lost; the pieces' best translations joined."""

from __future__ import annotations

import pytest

from tbuild.engine.decoding.search import Hypothesis
from tbuild.engine.serving.segments import Pieces, grouped, split_to_fit


def at_most(n: int):
    return lambda text: len(text) <= n


@pytest.mark.parametrize(("line", "limit", "want"), [
    ("short", 10, ["short"]),
    ("", 10, [""]),
    ("One two. Three four! Five?", 20, ["One two. Three four!", "Five?"]),  # sentences packed greedily
    ("Hello there. How are you?", 10, ["Hello", "there.", "How are", "you?"]),  # a sentence too long: words
    ("1" * 25, 10, ["1" * 10, "1" * 10, "1" * 5]),  # one word too long: characters
    ("ab cd efghijklmnopqrstu vw. x", 10, ["ab cd", "efghijklmn", "opqrstu", "vw. x"]),
    ("x", 0, ["x"]),  # a character that cannot fit is still a piece (the engine truncates it)
])
def test_split_to_fit(line: str, limit: int, want: list[str]) -> None:
    assert split_to_fit(line, at_most(limit)) == want


def test_pieces_join_best_texts_and_sum_scores() -> None:
    hyp = lambda tokens, score: Hypothesis(tokens=tokens, score=score, log_prob=score)  # noqa: E731
    results = [[hyp([1], -1.0)], [hyp([2], -0.5), hyp([3], -0.7)], [], [hyp([4], -0.25)]]
    lines = grouped(results, [1, 3])
    assert lines[0] == results[0]
    assert isinstance(lines[1], Pieces)
    decode = {(2,): "zwei", (4,): "vier"}.__getitem__
    assert lines[1].best(lambda ids: decode(tuple(ids))) == ("zwei vier", -0.75)
