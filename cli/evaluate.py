"""`tbuild evaluate`: decode a split and score it with sacreBLEU (BLEU, chrF) and perplexity; with --against,
compare two systems by paired bootstrap."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from .common import console, guarded, notify
from .options import (
    NO_REPEAT_NGRAM,
    SET_OPTION,
    Ensembling,
    Loading,
    Search,
    decode_runs,
    engine_loading,
    grouped,
    load_decoder,
)

TARGETS = typer.Argument(..., help="A spec, run directory or checkpoint; several: an ensemble of them (the "
                         "perplexity is the first one's).")


@guarded
@grouped
def evaluate(
    targets: list[Path] = TARGETS,
    split: str = typer.Option("test", "--split", help="test or valid (files from the spec's data section)."),
    src: Path | None = typer.Option(None, "--src", help="Score this source file instead of a split (with --ref)."),
    ref: Path | None = typer.Option(None, "--ref", help="References for --src."),
    lowercase: bool = typer.Option(False, "--lowercase", help="Headline BLEU lowercased (as many papers report)."),
    search: Search = Search(),
    show: int = typer.Option(3, "--show", help="Print this many example translations."),
    no_repeat_ngram: int | None = NO_REPEAT_NGRAM,
    ensembling: Ensembling = Ensembling(),
    loading: Loading = Loading(),
    params: Path | None = typer.Option(None, "--params", "-p", help="Parsing runs: an EVALB parameter file, as "
                                      "tbuild evalb's (default: COLLINS.prm's rules, built in)."),
    diagnose: bool = typer.Option(False, "--diagnose", help="Parsing runs: also F1 by sentence length beside "
                                  "the right-branching floor, teacher-forced accuracy by token kind and span "
                                  "errors (eval_SPLIT.diagnosis.json)."),
    against: list[Path] = typer.Option(None, "--against", help="Compare with this run (repeat it for an ensemble): "
                                       "both evaluated on the split, then each metric by sacreBLEU's paired "
                                       "bootstrap (scores with 95% intervals, the difference, its interval and "
                                       "p-value), written into the first one's eval_SPLIT.json."),
    bootstrap: int = typer.Option(1000, "--bootstrap", help="With --against: the number of resamples (sacreBLEU's "
                                  "default, 1000)."),
    set_: list[str] = SET_OPTION,
) -> None:
    """Decode and score: sacreBLEU BLEU with its signature, chrF, perplexity of the references; for a
    parsing run (data set treebank), EVALB's bracketing F1 instead (§6.3); a language model, tagger,
    classifier or masked LM: its own figures (its task's). With --against, two systems compared."""
    from tbuild.engine.errors import TbuildError
    from tbuild.engine.tasks.base import EvalCall
    from tbuild.engine.tasks.comparison import Side, evaluate_against
    from tbuild.engine.tasks.registry import task_of

    if split not in ("test", "valid"):
        raise TbuildError(f"--split must be test or valid, not {split!r}")
    if (src is None) != (ref is None):
        raise TbuildError("--src and --ref go together")
    engine = engine_loading(loading, ensembling)

    def side(paths: list[Path]) -> Side:
        runs = decode_runs(paths, set_, ensembling.profile, beam=search.beam, alpha=search.alpha,
                           stopping=search.stopping, patience=search.patience, no_repeat_ngram=no_repeat_ngram,
                           precision=loading.precision)
        call = EvalCall(split=split, src=src, ref=ref, lowercase=lowercase, show=show, loading=engine,
                        load_decoder=lambda: load_decoder(runs, engine, notify), notify=notify,
                        params=params, diagnose=diagnose)
        return Side(" + ".join(str(p) for p in paths), runs, call)

    mine = side(targets)
    if against:
        print_report(evaluate_against(mine, side(against), bootstrap))
    else:
        print_report(task_of(mine.runs[0].spec).evaluate(mine.runs, mine.call))


def print_report(report: list) -> None:
    """A task's report: its tables and lines, in order."""
    from tbuild.engine.tasks.base import Table as ReportTable

    for item in report:
        if isinstance(item, ReportTable):
            table = Table(title=item.title, title_justify="left")
            for i, column in enumerate(item.columns):
                table.add_column(column, justify="right" if i in item.right else "left")
            for row in item.rows:
                table.add_row(*row)
            console.print(table)
        else:
            console.print(item, highlight=False, soft_wrap=True)
