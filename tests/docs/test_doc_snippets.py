"""Every YAML block and every `tbuild …` line of README.md and docs/ runs as written: a spec validates as
`tbuild validate` checks it, a study as `tbuild tune --dry-run`, a sweep as `tbuild sweep --dry-run`; a command
line names a command and options the CLI has. A block after ``<!-- fragment -->`` is a part of a spec, not
run alone (docs/architecture.md, "Docs that run"). A snippet's id is its page and line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tbuild.builder import load_spec
from tbuild.builder.spec import Spec
from tbuild.cli.app import app

from .commands import problems
from .snippets import REPO, Snippet, all_snippets, pages

SNIPPETS = all_snippets()
YAML = [s for s in SNIPPETS if s.kind == "yaml" and not s.fragment]
CLI = [s for s in SNIPPETS if s.kind == "cli" and not s.fragment]
SPEC_KEYS = set(Spec.model_fields)  # a spec's top-level keys (task among them)


def kind_of(data: dict) -> str:
    """What file a YAML block is: a tune study (``space``), a sweep (``base``) or a spec."""
    if "space" in data:
        return "study"
    return "sweep" if "base" in data else "spec"


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder that looks like the clone's root (its top-level entries linked): a block is a file there,
    so ``extends: specs/base.yaml`` or ``base: specs/multi30k.yaml`` resolve as in the clone."""
    root = tmp_path_factory.mktemp("clone")
    for entry in REPO.iterdir():
        if entry.name not in (".git", "runs"):
            (root / entry.name).symlink_to(entry)
    return root


@pytest.mark.parametrize("snippet", YAML, ids=lambda s: s.id)
def test_yaml_block_runs(snippet: Snippet, clone: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = yaml.safe_load(snippet.text)
    assert isinstance(data, dict), f"{snippet.id}: a YAML block that is not a mapping: mark it {FRAGMENT_HINT}"
    kind = kind_of(data)
    if kind == "spec":
        unknown = set(data) - SPEC_KEYS
        assert not unknown, f"{snippet.id}: not a spec, sweep or study (keys {sorted(unknown)})"
    path = clone / f"snippet-{snippet.line}.yaml"
    path.write_text(snippet.text, encoding="utf-8")
    monkeypatch.chdir(clone)
    args = {"spec": ["validate", path.name], "study": ["tune", path.name, "--dry-run"],
            "sweep": ["sweep", path.name, "--dry-run"]}[kind]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, f"{snippet.id}: tbuild {' '.join(args)} (a {kind}):\n{result.output}"
    if kind == "spec":
        assert unkept_promises(data, load_spec(path).spec) == [], snippet.id


def unkept_promises(own: dict, spec: Spec) -> list[str]:
    """What a spec block leads a reader to expect that its resolved spec does not do: one that extends
    another names its own run (else it trains into the base's run directory), and pre-norm set in the
    block gets the final norm the docs say pre-norm has unless the block says otherwise (an extended
    post-norm base may have turned it off)."""
    out = []
    if "extends" in own and not {"name", "output_dir"} & set(own):
        out.append(f"trains into the run directory of what it extends (runs/{spec.name}): give it a name")
    model = own.get("model") or {}
    if model.get("norm_placement") == "pre" and "final_norm" not in model and spec.model.final_norm is False:
        out.append("pre-norm without its final norm (the base spec sets final_norm: false): set final_norm: true")
    return out


@pytest.mark.parametrize("snippet", CLI, ids=lambda s: s.id)
def test_command_line_matches_the_cli(snippet: Snippet) -> None:
    assert problems(snippet.text, synopsis=not snippet.fenced) == [], snippet.text


FRAGMENT_HINT = "with <!-- fragment --> on the line before its fence"


def test_spec_fences_say_yaml() -> None:
    """A spec, sweep or study in a fence without ``yaml`` would not run: label it."""
    assert [s.id for s in SNIPPETS if s.kind == "unlabelled"] == []


def test_the_docs_have_snippets() -> None:
    """The extraction finds what the pages hold (a broken pattern would leave nothing to check)."""
    assert len(YAML) >= 10 and len(CLI) >= 100
    assert {s.file for s in CLI} >= {"README.md", "docs/training.md", "docs/graphs.md"}


def test_fragment_marker_excludes_a_block(tmp_path: Path) -> None:
    from .snippets import extract

    page = tmp_path / "page.md"
    page.write_text("```yaml\nmodel: {d_model: 8}\n```\n\n<!-- fragment -->\n```yaml\npointer: {}\n```\n")
    found = extract(page)
    assert [(s.line, s.fragment) for s in found] == [(2, False), (7, True)]


WORKSHOP = re.compile(
    r"\bissues?\b|(?<!torchrun's )\bagents?\b|\bagents'|\ba helper\b|\bhelper's\b|(?<!shell )\bsessions?\b"
    r"|\bmy own\b|/tmp/|(?-i:\btask #\d)", re.IGNORECASE)


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_no_workshop_words(page: Path) -> None:
    """The pages speak to users: no words about how the project was made (who ran what, in which sitting)."""
    found = [f"{page.name}:{n}: {m.group(0)!r}" for n, line in enumerate(page.read_text().splitlines(), 1)
             for m in WORKSHOP.finditer(line)]
    assert found == []


def test_install_hints_agree() -> None:
    """An extra is installed one way in every page, from the clone (tbuild is not on an index): pip install -e
    '.[NAME]', NAME one of pyproject.toml's extras."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in Python >= 3.11")
    extras = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    wrong = []
    for page in pages():
        for n, line in enumerate(page.read_text().splitlines(), 1):
            for hint in re.findall(r"pip install [^`#\n]*?\[[^\]]*\][^\s`]*", line):
                names = re.fullmatch(r"pip install -e '\.\[([a-z0-9_,-]+)\]'", hint)
                if names is None or not set(names.group(1).split(",")) <= extras:
                    wrong.append(f"{page.name}:{n}: {hint}")
    assert wrong == []
