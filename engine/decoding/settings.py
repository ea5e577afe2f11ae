"""Decoding settings chosen on the command line: a named profile of the spec's ``decode`` section."""

from __future__ import annotations

import json

from tbuild.builder.spec import DecodeSpec

from ..errors import TbuildError


def profile_overrides(decode: DecodeSpec, profile: str | None) -> list[str]:
    """``decode.profiles.NAME``'s settings as --set overrides (options given after them win)."""
    if profile is None:
        return []
    if profile not in decode.profiles:
        known = ", ".join(sorted(decode.profiles)) or "none"
        raise TbuildError(f"--profile {profile!r}: no such decode profile in the spec (it has: {known})")
    values = decode.profiles[profile].model_dump(exclude_none=True)
    return [f"decode.{key}={json.dumps(value)}" for key, value in values.items()]
