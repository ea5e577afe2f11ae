"""The wheel ships every package: setup.py finds them (four folders map to tbuild.*), so a new folder with an
``__init__.py`` (a task's) ships with no edit elsewhere."""

from __future__ import annotations

import importlib.util
import os

from tests.conftest import REPO


def test_every_package_folder_is_found() -> None:
    spec = importlib.util.spec_from_file_location("tbuild_setup", REPO / "setup.py")
    assert spec is not None and spec.loader is not None
    setup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup)  # the setup() call is under __main__: nothing is built
    cwd = os.getcwd()
    os.chdir(REPO)  # as the build backend runs it
    try:
        found = set(setup.packages())
    finally:
        os.chdir(cwd)
    for package, folder in setup.FOLDERS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(REPO / folder).parts
            assert ".".join((package, *parts)) in found, f"{init.parent} is missing from the wheel's packages"
    assert {"tbuild.engine.tasks.summarization", "tbuild.builder.spec", "tbuild.cli"} <= found
