"""Helpers of the spec tests: a spec file written from text, and the one-line error loading it gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from tbuild.builder import SpecError, load_spec


def write(tmp: Path, text: str) -> Path:
    """``text`` as ``tmp/s.yaml``."""
    path = tmp / "s.yaml"
    path.write_text(text)
    return path


def error_of(path: Path) -> str:
    """The SpecError that loading ``path`` raises, checked to be one line."""
    with pytest.raises(SpecError) as info:
        load_spec(path)
    message = str(info.value)
    assert len(message.splitlines()) == 1
    return message
