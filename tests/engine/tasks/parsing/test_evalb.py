"""The pure-Python EVALB against EVALB's own sample outputs, and one hand-made case per rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from tbuild.engine.errors import TbuildError
from tbuild.engine.tasks.parsing.evalb import Params, collins, evalb, parse_params, read_lines, read_params

EVALB = Path(__file__).parent / "evalb"  # EVALB's own sample files and outputs (public domain, see LICENSE)


@pytest.mark.parametrize(("prm", "out"), [("sample.prm", "sample.prm.out"), ("COLLINS.prm", "sample.collins.out")])
def test_reproduces_evalb_output(prm: str, out: str) -> None:
    result = evalb(read_lines(EVALB / "sample.gld"), read_lines(EVALB / "sample.tst"), read_params(EVALB / prm))
    assert result.report() == (EVALB / out).read_text()


def test_collins_figures_and_messages() -> None:
    result = evalb(read_lines(EVALB / "sample.gld"), read_lines(EVALB / "sample.tst"), collins())
    assert (round(result.all.recall, 2), round(result.all.precision, 2), round(result.all.fmeasure, 2)) == (
        87.23, 90.11, 88.65)
    assert (result.all.errors, result.all.skipped, result.short.sentences) == (6, 2, 23)
    assert "19 : Words unmatch (this|This)" in result.messages


def test_collins_params_match_the_file() -> None:
    assert read_params(EVALB / "COLLINS.prm") == collins()


def score(gold: str, test: str, params: Params | None = None) -> tuple[float, float, int]:
    r = evalb([gold], [test], params or collins())
    return r.all.recall, r.all.precision, r.all.errors


def test_punctuation_is_ignored() -> None:
    gold = "(TOP (S (NP (DT the) (NN dog)) (VP (VBZ barks)) (. .)))"
    test = "(TOP (S (NP (DT the) (NN dog)) (VP (VBZ barks) (. .))))"  # the period attached lower
    assert score(gold, test) == (100.0, 100.0, 0)
    assert evalb([gold], [test]).sentences[0].length == 4  # length still counts punctuation


def test_advp_equals_prt_and_function_tags_are_cut() -> None:
    gold = "(TOP (S (NP-SBJ-1 (PRP he)) (VP (VBD gave) (ADVP (RB up)))))"
    test = "(TOP (S (NP (PRP he)) (VP (VBD gave) (PRT (RP up)))))"
    assert score(gold, test) == (100.0, 100.0, 0)
    assert score(gold, test, Params(delete_labels=["TOP"]))[0] < 100


def test_top_is_removed() -> None:
    r = evalb(["(TOP (S (NN a) (NN b)))"], ["(S (NN a) (NN b))"])
    assert (r.all.gold, r.all.test, r.all.match) == (1, 1, 1)
    r = evalb(["(TOP (S (NN a) (NN b)))"], ["(S (NN a) (NN b))"], Params())  # no DELETE_LABEL: TOP counts
    assert (r.all.gold, r.all.test, r.all.match) == (2, 1, 1)


def test_duplicate_brackets_are_a_multiset() -> None:
    gold = "(TOP (S (NP (NP (NN a) (NN b)))))"  # NP twice over the same span
    one = "(TOP (S (NP (NN a) (NN b))))"
    r = evalb([gold], [one])
    assert (r.all.match, r.all.gold, r.all.test) == (2, 3, 2)
    r = evalb([one], [gold])  # the test's second NP matches nothing
    assert (r.all.match, r.all.gold, r.all.test) == (2, 2, 3)


def test_length_mismatch_is_an_error_and_empty_is_skipped() -> None:
    r = evalb(["(S (NN a) (NN b))", "(S (NN a) (NN b))"], ["(S (NN a))", ""])
    assert [s.status for s in r.sentences] == [1, 2]
    assert (r.all.errors, r.all.skipped, r.all.valid) == (1, 1, 0)
    assert r.messages == ["1 : Length unmatch (2|1)"]


def test_crossing_and_unlabeled() -> None:
    gold = "(S (A (P a) (Q b)) (R c))"
    test = "(S (P a) (B (Q b) (R c)))"
    r = evalb([gold], [test])
    assert (r.all.crossing, r.all.match) == (1, 1)
    assert evalb(["(S (A (P a)) (B (Q b)))"], ["(S (X (P a)) (Y (Q b)))"], Params(labeled=False)).all.match == 3


def test_max_error_stops_as_evalb_does() -> None:
    with pytest.raises(TbuildError, match="MAX_ERROR"):
        evalb(["(S (NN a))"] * 4, ["(S (NN b))"] * 4, Params(max_error=1))


def test_parameter_file_errors() -> None:
    assert parse_params("# c\nLABELED 0   \nEQ_WORD a b\nDELETE_LABEL_FOR_LENGTH -NONE-\n").labeled is False
    with pytest.raises(TbuildError, match=r"x\.prm:1: EQ_LABEL: requires two values"):
        parse_params("EQ_LABEL ADVP", "x.prm")
    with pytest.raises(TbuildError, match="QUOTE_LABEL: not supported"):
        parse_params("QUOTE_LABEL POS")


def test_the_evalb_command_prints_evalb_report(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tbuild.cli.app import app

    out = CliRunner().invoke(app, ["evalb", str(EVALB / "sample.gld"), str(EVALB / "sample.tst"), "-p",
                                   str(EVALB / "COLLINS.prm")])
    assert out.exit_code == 0 and out.stdout == (EVALB / "sample.collins.out").read_text()
    assert "19 : Words unmatch (this|This)" in out.stderr
    (tmp_path / "bad.prm").write_text("QUOTE_LABEL POS\n")
    bad = CliRunner().invoke(app, ["evalb", str(EVALB / "sample.gld"), str(EVALB / "sample.tst"), "-p",
                                   str(tmp_path / "bad.prm")])
    assert bad.exit_code == 2 and "bad.prm:1: QUOTE_LABEL: not supported" in bad.output


def test_status_and_match_codes_are_named() -> None:
    """evalb.c's codes as enums: a sentence is OK, ERROR or SKIPPED; a bracket MATCHED, UNMATCHED or
    DELETED; the report still prints the numbers."""
    from tbuild.engine.tasks.parsing.evalb import Match, Status, _massage, collins, parse_tree

    r = evalb(["(S (NN a) (NN b))", "(S (NN a) (NN b))", "(S (NN a))"], ["(S (NN a) (NN b))", "(S (NN a))", ""])
    assert [s.status for s in r.sentences] == [Status.OK, Status.ERROR, Status.SKIPPED]
    assert [line.split()[2] for line in r.report().splitlines()[3:6]] == ["0", "1", "2"]
    parsed = parse_tree("(TOP (S (NP (NN a)) (X (NN b))))", collins())
    _massage(parsed.brackets, collins())
    assert [b.result for b in parsed.brackets] == [Match.DELETED, Match.UNMATCHED, Match.UNMATCHED, Match.UNMATCHED]


def test_the_stop_at_max_error_is_a_line_of_its_own(tmp_path: Path) -> None:
    """As evalb: the sentences scored before the stop on stdout, each line ended, the messages on
    stderr, then the stop on a line of its own (not run into the sentence list)."""
    from typer.testing import CliRunner

    from tbuild.cli.app import app
    from tbuild.engine.tasks.parsing.evalb import EvalbStopped

    with pytest.raises(EvalbStopped) as stop:
        evalb(["(S (NN a))"] * 4, ["(S (NN b))"] * 4, Params(max_error=1))
    assert [s.id for s in stop.value.result.sentences] == [1, 2] and len(stop.value.result.messages) == 3
    assert stop.value.result.listing().endswith(stop.value.result.sentences[-1].line() + "\n")
    (tmp_path / "gold").write_text("(S (NN a))\n" * 15)
    (tmp_path / "test").write_text("(S (NN b))\n" * 15)
    out = CliRunner().invoke(app, ["evalb", str(tmp_path / "gold"), str(tmp_path / "test")])
    assert out.exit_code == 2
    assert out.stdout.splitlines()[3:] == [s.line() for s in stop.value.result.sentences] + [
        f"{n:4d}    1    1    0.00   0.00     0      0    0      0      0     0     0.00" for n in range(3, 12)]
    assert out.stdout.endswith("\n")
    lines = out.stderr.splitlines()
    assert lines[:12] == [f"{n} : Words unmatch (a|b)" for n in range(1, 13)]  # evalb prints the last too
    assert lines[12] == "error: EVALB stops at line 12: more than MAX_ERROR (10) errors, the last: Words unmatch (a|b)"
