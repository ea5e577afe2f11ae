"""The package's layering: imports point one way (cli → engine → builder → components), decoding
never imports training, commands share options through cli/options.py, and engine functions stay short."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGES = {"components": "tbuild.components", "builder": "tbuild.builder", "engine": "tbuild.engine",
            "cli": "tbuild.cli"}
LAYERS = ["tbuild.components", "tbuild.builder", "tbuild.engine", "tbuild.cli"]  # each may import those before it


def modules() -> dict[str, Path]:
    found = {}
    for folder, package in PACKAGES.items():
        for path in (REPO / folder).rglob("*.py"):
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            name = ".".join((package, *parts))
            found[name.removesuffix(".__init__")] = path
    return found


def imports(name: str, path: Path) -> set[str]:
    """Absolute names of the tbuild modules ``path`` imports (relative imports resolved)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            out |= {base} | {f"{base}.{a.name}" for a in node.names}
    return {m for m in out if m.startswith("tbuild.")}


@pytest.mark.parametrize("name", sorted(modules()))
def test_imports_point_one_way(name: str) -> None:
    path = modules()[name]
    layer = next(i for i, layer in enumerate(LAYERS) if name == layer or name.startswith(layer + "."))
    for target in imports(name, path):
        target_layer = next(i for i, layer in enumerate(LAYERS) if target == layer or target.startswith(layer + "."))
        assert target_layer <= layer, f"{name} imports {target}, a layer above it"
        if name.startswith("tbuild.engine.decoding"):
            assert not target.startswith("tbuild.engine.training"), f"{name} (decoding) imports {target}"
        if name.startswith("tbuild.cli.") and name not in ("tbuild.cli.app", "tbuild.cli.__main__"):
            sibling = target.startswith("tbuild.cli.") and target.split(".")[2] not in ("common", "options", "progress")
            assert not sibling, f"{name} imports another command's module {target}; shared options go in options.py"


def test_engine_functions_are_short() -> None:
    """No function under engine/ is longer than about 80 lines of code (its docstring not counted)."""
    long = []
    for path in (REPO / "engine").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                body = node.body[1:] if ast.get_docstring(node) else node.body
                lines = node.end_lineno - body[0].lineno + 1
                if lines > 80:
                    long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, long
