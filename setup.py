"""The wheel's packages, found: each of the four folders is a ``tbuild.*`` package with every sub-folder holding
an ``__init__.py`` (a task's folder too: adding one needs no edit here). The rest of the metadata is in
pyproject.toml."""

from setuptools import find_packages, setup

FOLDERS = {"tbuild.builder": "builder", "tbuild.components": "components", "tbuild.engine": "engine",
           "tbuild.cli": "cli"}  # package -> its folder


def packages() -> list[str]:
    """Every package of the four folders, as ``tbuild.*`` names."""
    return [f"{name}.{sub}" if sub else name for name, folder in FOLDERS.items()
            for sub in ("", *find_packages(folder))]


if __name__ == "__main__":
    setup(package_dir=FOLDERS, packages=packages())
