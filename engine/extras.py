"""Optional dependencies (pyproject.toml's extras): import one, or stop with one line naming the extra that
installs it. Every command that needs an optional package asks here, so the advice reads the same everywhere."""

from __future__ import annotations

import importlib
import importlib.util
import re
from types import ModuleType

from .errors import TbuildError

EXTRA = re.compile(r"tbuild\[([\w,-]+)\]")


def install_hint(requirement: str) -> str:
    """The pip command that installs ``requirement``: one of tbuild's extras (``"tbuild[serve]"``) both as
    installed from a package index and from a clone, anything else (a plugin's package) as it is."""
    extra = EXTRA.fullmatch(requirement)
    if extra is None:
        return f"pip install '{requirement}'"
    return f"pip install '{requirement}' (from a clone: pip install -e '.[{extra[1]}]')"


def _not_installed(module: str, error: ImportError) -> bool:
    """The import failed because ``module`` (or its top-level package) is absent, not because it is broken."""
    top = module.split(".")[0]
    return isinstance(error, ModuleNotFoundError) and error.name is not None and (
        error.name == top or module == error.name or module.startswith(error.name + "."))


def _missing(module: str, requirement: str, purpose: str) -> TbuildError:
    return TbuildError(f"{purpose} needs the {module} package: {install_hint(requirement)}")


def require(module: str, requirement: str, purpose: str) -> ModuleType:
    """``module`` imported, or a one-line ``TbuildError``: "``purpose`` needs the ``module`` package" with
    ``install_hint(requirement)``; a package that is installed but fails to import says why."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        if _not_installed(module, e):
            raise _missing(module, requirement, purpose) from None
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise TbuildError(f"{purpose} needs the {module} package, which fails to import ({why}): "
                          f"{install_hint(requirement)}") from None


def check_installed(module: str, requirement: str, purpose: str) -> None:
    """As ``require``, without importing ``module``: for a heavy package checked long before it is used."""
    if importlib.util.find_spec(module) is None:
        raise _missing(module, requirement, purpose)
