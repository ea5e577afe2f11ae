"""The wheel ships every package: pyproject.toml lists them by hand (four folders map to tbuild.*)."""

from __future__ import annotations

import pytest

from tests.conftest import REPO

tomllib = pytest.importorskip("tomllib", reason="tomllib is in Python >= 3.11")


def test_every_package_folder_is_listed() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    for package, folder in config["package-dir"].items():
        for init in (REPO / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(REPO / folder).parts
            assert ".".join((package, *parts)) in listed, f"{init.parent} is missing from pyproject's packages"
