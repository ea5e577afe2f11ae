"""`tbuild evalb`: score bracketed trees as EVALB does (no external binary), printing its report."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from .common import err_console, guarded


@guarded
def evalb(
    gold: Path = typer.Argument(..., help="Gold trees, one per line."),
    test: Path = typer.Argument(..., help="Test trees, one per line (an empty line: skipped)."),
    params: Path | None = typer.Option(None, "--params", "-p", help="An EVALB parameter file (default: "
                                       "COLLINS.prm's rules, as parsing papers report)."),
) -> None:
    """EVALB in Python: labelled bracketing recall, precision, F-measure, complete match, crossing and
    tagging accuracy, all sentences and len<=CUTOFF_LEN; EVALB's report on stdout, its messages on stderr."""
    from tbuild.engine.tasks.parsing.evalb import EvalbStopped, collins, read_lines, read_params
    from tbuild.engine.tasks.parsing.evalb import evalb as score

    try:
        result = score(read_lines(gold), read_lines(test), read_params(params) if params else collins())
    except EvalbStopped as stop:  # as evalb: the sentences scored so far, then the stop on its own line
        for message in stop.result.messages:
            err_console.print(message, highlight=False, soft_wrap=True)
        sys.stdout.write(stop.result.listing())
        sys.stdout.flush()
        raise
    for message in result.messages:
        err_console.print(message, highlight=False, soft_wrap=True)
    sys.stdout.write(result.report())
