"""The training display's last line names the best validation score by the run's selection metric, then
perplexity."""

from __future__ import annotations

import math

import pytest

from tbuild.cli.progress import Reporter

END = {"step": 40, "why": "max_steps reached", "elapsed_call": 60.0, "elapsed": 120.0}


@pytest.mark.parametrize(("end", "says"), [
    ({"metric": "ppl", "best_score": 8.5, "best_ppl": 8.5}, "in all, best validation ppl 8.50)"),
    ({"metric": "bleu", "best_score": 31.25, "best_ppl": 8.5},
     "in all, best validation bleu 31.25, best validation ppl 8.50)"),
    ({"metric": "per", "best_score": None, "best_ppl": math.inf}, "2.0 in all)"),
])
def test_the_last_line_names_the_selection_metric(end: dict, says: str, capsys: pytest.CaptureFixture) -> None:
    reporter = Reporter()
    reporter.live, reporter.progress = False, None
    reporter("end", END | end)
    assert capsys.readouterr().out.strip().endswith(says)
