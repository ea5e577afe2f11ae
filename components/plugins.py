"""Third-party blocks arrive through the ``tbuild.components`` entry-point group.

A plugin package declares, in its pyproject.toml::

    [project.entry-points."tbuild.components"]
    my_blocks = "my_package.blocks"

Loading the entry point imports that module, whose ``@ATTENTION.register(...)`` (etc.) decorators
add its blocks. A spec can never name an arbitrary importable path.
"""

from __future__ import annotations

from importlib.metadata import entry_points

GROUP = "tbuild.components"
_loaded = False


def load_plugins() -> list[str]:
    """Import every installed plugin once; returns the entry-point names loaded."""
    global _loaded
    if _loaded:
        return []
    _loaded = True
    names = []
    for ep in entry_points(group=GROUP):
        ep.load()
        names.append(ep.name)
    return names
