"""The package's layering: imports point one way (cli → engine → builder → components), decoding
never imports training or export, data never imports a task, training imports none but their protocol
and registry (``tasks.base``, ``tasks.registry``: it asks the run's task), the trainer never imports fine-tuning,
commands share options through cli/options.py, and functions in engine/ and cli/ stay short. The checker
is tested on made-up modules too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGES = {"components": "tbuild.components", "builder": "tbuild.builder", "engine": "tbuild.engine",
            "cli": "tbuild.cli"}
LAYERS = ["tbuild.components", "tbuild.builder", "tbuild.engine", "tbuild.cli"]  # each may import those before it
# (importer, what it must not import): stages of the engine that sit below another
TASK_MODULES = ("translation", "language_model", "tagging", "classification", "masked_lm", "parsing")
FORBIDDEN = [("tbuild.engine.decoding", "tbuild.engine.training"), ("tbuild.engine.data", "tbuild.engine.tasks"),
             *(("tbuild.engine.training", f"tbuild.engine.tasks.{name}") for name in TASK_MODULES),
             ("tbuild.engine.decoding", "tbuild.engine.export"),  # export writes and loads engines from decoding
             ("tbuild.engine.finetune", "tbuild.engine.training"),
             ("tbuild.engine.training.trainer", "tbuild.engine.finetune")]  # the trainer gets plain Initial values
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


def imports(name: str, source: str, *, package: bool = False) -> set[str]:
    """Absolute names of the tbuild modules the module ``name`` (a package's ``__init__`` if
    ``package``) imports in ``source`` (relative imports resolved)."""
    anchor_of = name if package else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = anchor_of.split(".")[: len(anchor_of.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            out |= {base} | {f"{base}.{a.name}" for a in node.names}
    return {m for m in out if m.startswith("tbuild.")}


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
