"""The package's layering: imports point one way (cli → engine → builder → components), decoding
never imports training or export, data never imports a task nor a task training, training imports none but
their protocol and registry (``tasks.base``, ``tasks.registry``: it asks the run's task), the trainer never
imports fine-tuning, the run directory, the device and the figures import none of engine's stages, no two modules import
each other (an import for annotations only, under ``if TYPE_CHECKING:``, or one inside a function counts),
commands share options through cli/options.py, and functions in engine/ and cli/ stay short. The checker
is tested on made-up modules too."""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGES = {"components": "tbuild.components", "builder": "tbuild.builder", "engine": "tbuild.engine",
            "cli": "tbuild.cli"}
LAYERS = ["tbuild.components", "tbuild.builder", "tbuild.engine", "tbuild.cli"]  # each may import those before it
# (importer, what it must not import): stages of the engine that sit below another
TASK_MODULES = ("translation", "language_model", "tagging", "classification", "masked_lm", "parsing")
FORBIDDEN = [("tbuild.engine.decoding", "tbuild.engine.training"), ("tbuild.engine.data", "tbuild.engine.tasks"),
             ("tbuild.engine.tasks", "tbuild.engine.training"),  # the trainer asks the task: never the other way
             *(("tbuild.engine.training", f"tbuild.engine.tasks.{name}") for name in TASK_MODULES),
             ("tbuild.engine.decoding", "tbuild.engine.export"),  # export writes and loads engines from decoding
             ("tbuild.engine.hf", "tbuild.engine.export"),  # export checks a run, then writes it through hf
             ("tbuild.engine.finetune", "tbuild.engine.training"),
             ("tbuild.engine.training.trainer", "tbuild.engine.finetune")]  # the trainer gets plain Initial values
# the run directory's files, the device and the figures sit below every other folder of the engine (its stages)
LOW = ("run", "device", "figures")
STAGES = sorted(p.name for p in (REPO / "engine").iterdir() if (p / "__init__.py").is_file() and p.name not in LOW)
FORBIDDEN += [(f"tbuild.engine.{low}", f"tbuild.engine.{stage}") for low in LOW for stage in STAGES]
SHARED_CLI = ("common", "options", "progress")  # the cli modules every command may import
MAX_LINES = 80  # of a function's code, its docstring not counted
SHORT = ("engine", "cli")  # the folders whose functions must stay short


def modules() -> dict[str, Path]:
    found = {}
    for folder, package in PACKAGES.items():
        for path in (REPO / folder).rglob("*.py"):
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            name = ".".join((package, *parts))
            found[name.removesuffix(".__init__")] = path
    return found


def _imported(name: str, source: str, *, package: bool = False) -> Iterator[tuple[str, list[str]]]:
    """(module, names imported from it) for each import in ``source`` of the module ``name`` (a package's
    ``__init__`` if ``package``), relative imports resolved; ``import a.b`` gives ("a.b", []). Every import
    counts, at the top, inside a function or under ``if TYPE_CHECKING:`` (``ast.walk`` visits them all)."""
    anchor_of = name if package else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from ((a.name, []) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = anchor_of.split(".")[: len(anchor_of.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            yield base, [a.name for a in node.names]


def imports(name: str, source: str, *, package: bool = False) -> set[str]:
    """Absolute names of the tbuild modules the module ``name`` (a package's ``__init__`` if
    ``package``) imports in ``source`` (relative imports resolved)."""
    out = set()
    for base, names in _imported(name, source, package=package):
        out |= {base} | {f"{base}.{n}" for n in names}
    return {m for m in out if m.startswith("tbuild.")}


def imported_modules(name: str, source: str, known: Collection[str], *, package: bool = False,
                     reexports: dict[str, dict[str, str]] | None = None) -> set[str]:
    """The modules among ``known`` that module ``name`` imports: ``from a import b`` names module a.b where
    there is one (a package's submodule), else the module that defines b: the submodule package a imports it
    from (``reexports``: package -> name -> module), or a itself."""
    out, reexports = set(), reexports or {}
    for base, names in _imported(name, source, package=package):
        for n in names or [""]:
            sub = f"{base}.{n}"
            out.add(sub if sub in known else reexports.get(base, {}).get(n, base))
    return (out & set(known)) - {name}


def mutual_imports(sources: dict[str, tuple[str, bool]]) -> list[str]:
    """Each pair of modules that import each other, as ``a <-> b``; ``sources`` holds each module's text and
    whether it is a package's ``__init__``."""
    reexports = {name: {n: base for base, names in _imported(name, text, package=True) for n in names
                        if base in sources}
                 for name, (text, package) in sources.items() if package}
    graph = {name: imported_modules(name, text, sources, package=package, reexports=reexports)
             for name, (text, package) in sources.items()}
    return [f"{a} <-> {b}" for a in sorted(graph) for b in sorted(graph[a]) if a < b and a in graph.get(b, ())]


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def layer_errors(name: str, source: str, *, package: bool = False) -> list[str]:
    """Every import of module ``name`` (text ``source``) that breaks a layer rule, one line each."""
    layer = next(i for i, top in enumerate(LAYERS) if _within(name, top))
    command = name.startswith("tbuild.cli.") and name not in ("tbuild.cli.app", "tbuild.cli.__main__")
    errors = []
    for target in sorted(imports(name, source, package=package)):
        target_layer = next(i for i, top in enumerate(LAYERS) if _within(target, top))
        if target_layer > layer:
            errors.append(f"{name} imports {target}, a layer above it")
        errors += [f"{name} imports {target}: {below.rsplit('.', 1)[1]} sits below {above.rsplit('.', 1)[1]}"
                   for below, above in FORBIDDEN if _within(name, below) and _within(target, above)]
        if command and target.startswith("tbuild.cli.") and target.split(".")[2] not in SHARED_CLI:
            errors.append(f"{name} imports another command's module {target}; shared options go in options.py")
    return errors


def long_functions(source: str, where: str) -> list[str]:
    """The functions in ``source`` longer than MAX_LINES lines of code, as ``where:line name (n lines)``."""
    long = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body[1:] if ast.get_docstring(node) and len(node.body) > 1 else node.body
            lines = node.end_lineno - body[0].lineno + 1  # type: ignore[operator]
            if lines > MAX_LINES:
                long.append(f"{where}:{node.lineno} {node.name} ({lines} lines)")
    return long


@pytest.mark.parametrize("name", sorted(modules()))
def test_imports_point_one_way(name: str) -> None:
    path = modules()[name]
    errors = layer_errors(name, path.read_text(), package=path.name == "__init__.py")
    assert not errors, "\n".join(errors)


def test_no_two_modules_import_each_other() -> None:
    """A circle of two (one of them importing for annotations only, or inside a function) is a module
    split in two: one of them, or a third module both import, should hold what they share."""
    sources = {name: (path.read_text(), path.name == "__init__.py") for name, path in modules().items()}
    assert not mutual_imports(sources), "\n".join(mutual_imports(sources))


@pytest.mark.parametrize("folder", SHORT)
def test_functions_are_short(folder: str) -> None:
    """No function under engine/ or cli/ is longer than about 80 lines of code (its docstring not counted)."""
    long = [line for path in sorted((REPO / folder).rglob("*.py"))
            for line in long_functions(path.read_text(), str(path.relative_to(REPO)))]
    assert not long, long


def test_the_checker_refuses_an_upward_import() -> None:
    """Made-up modules: data → parsing, training → a task's module, decoding → training, engine → cli and
    command → command are refused; data → its own modules, parsing → data, training → the task registry
    and a command → options are not."""
    assert layer_errors("tbuild.engine.data.treebank", "from ..tasks.parsing.trees import Tree\n") == [
        "tbuild.engine.data.treebank imports tbuild.engine.tasks.parsing.trees: data sits below tasks",
        "tbuild.engine.data.treebank imports tbuild.engine.tasks.parsing.trees.Tree: data sits below tasks"]
    assert layer_errors("tbuild.engine.data", "import tbuild.engine.tasks.parsing.evalb\n", package=True) == [
        "tbuild.engine.data imports tbuild.engine.tasks.parsing.evalb: data sits below tasks"]
    assert layer_errors("tbuild.engine.training.scoring", "from ..tasks.parsing.evalb import evalb\n")
    assert not layer_errors("tbuild.engine.training.run", "from ..tasks.registry import task_of\n")
    assert layer_errors("tbuild.engine.tasks.parsing.task", "from ...training.scoring import scored\n") == [
        "tbuild.engine.tasks.parsing.task imports tbuild.engine.training.scoring: tasks sits below training",
        "tbuild.engine.tasks.parsing.task imports tbuild.engine.training.scoring.scored: tasks sits below training"]
    assert layer_errors("tbuild.engine.decoding.search", "from ..training import trainer\n")
    assert layer_errors("tbuild.engine.decoding.ct2", "from ..export.cache import cached_export\n")
    assert layer_errors("tbuild.engine.training.trainer", "from ..finetune.start import resolve_start\n")
    assert layer_errors("tbuild.engine.run.card", "from tbuild.cli.common import console\n")[0] == (
        "tbuild.engine.run.card imports tbuild.cli.common, a layer above it")
    assert layer_errors("tbuild.cli.decode", "from .evaluate import evaluate\n")
    assert not layer_errors("tbuild.engine.data.treebank", "from .trees import Tree\nfrom ..errors import DataError\n")
    assert not layer_errors("tbuild.engine.tasks.parsing.evaluation", "from ...data.trees import read_treebank\n")
    assert not layer_errors("tbuild.cli.decode", "from .options import SET_OPTION\n")


def test_the_checker_refuses_a_long_function_in_cli() -> None:
    """A made-up command of 81 lines of code is refused, one of 80 (plus its docstring) is not."""
    def command(lines: int) -> str:
        return 'def decode() -> None:\n    """Help."""\n' + "    x = 1\n" * lines

    assert long_functions(command(81), "cli/decode.py") == ["cli/decode.py:1 decode (81 lines)"]
    assert long_functions(command(80), "cli/decode.py") == []
    assert "cli" in SHORT


def test_the_checker_finds_two_modules_that_import_each_other() -> None:
    """Made-up modules: an import for annotations only (``if TYPE_CHECKING:``) or inside a function closes a
    circle as a top-level one does; a package importing its submodule, which imports a sibling through the
    package (``from . import sibling``), does not; nor does one module importing another's names. A name
    imported from a package counts as imported from the submodule the package has it from."""
    typed = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .trainer import Trainer\n"
    lazy = "def f():\n    from .trainer import Trainer\n"
    trainer = "from .run import TrainingInputs\n"
    for run in (typed, lazy):
        sources = {"tbuild.engine.training.run": (run, False), "tbuild.engine.training.trainer": (trainer, False)}
        assert mutual_imports(sources) == ["tbuild.engine.training.run <-> tbuild.engine.training.trainer"]
    package = {"tbuild.engine.training": ("from .trainer import Trainer\n", True),
               "tbuild.engine.training.trainer": ("from . import distributed\n", False),
               "tbuild.engine.training.distributed": ("import torch\n", False)}
    assert mutual_imports(package) == []
    one_way = {"tbuild.builder.resolved": ("from .spec.model import ModelSpec\n", False),
               "tbuild.builder.spec.model": ("from ..errors import FieldError\n", False)}
    assert mutual_imports(one_way) == []
    through_package = {"tbuild.builder.spec": ("from .model import ModelSpec\n", True),
                       "tbuild.builder.spec.model": ("from ..resolved import resolve\n", False),
                       "tbuild.builder.resolved": (typed.replace(".trainer import Trainer", ".spec import ModelSpec"),
                                                   False)}
    assert mutual_imports(through_package) == ["tbuild.builder.resolved <-> tbuild.builder.spec.model"]
    known = {"tbuild.engine.run.directory", "tbuild.engine.run.card"}
    assert imported_modules("tbuild.engine.run.card", "from .directory import Run, read_jsonl\n", known) == {
        "tbuild.engine.run.directory"}


def test_the_checker_keeps_the_run_directory_below_the_stages() -> None:
    """The one upward arrow there was (figures → training's metrics file names) is refused; every folder of
    the engine but these three is a stage above them."""
    assert {"data", "training", "decoding", "export", "start"} <= set(STAGES) and not set(LOW) & set(STAGES)
    assert layer_errors("tbuild.engine.figures.plots", "from ..training.metrics import TRAIN_FILE\n")[0] == (
        "tbuild.engine.figures.plots imports tbuild.engine.training.metrics: figures sits below training")
    assert not layer_errors("tbuild.engine.figures.plots", "from ..run.directory import TRAIN_FILE\n")
