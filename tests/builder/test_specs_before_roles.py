"""Every spec under specs/ as tbuild at c26b44a resolved it (main just before special ids became data): the same
architecture hash and the same resolved form, key for key. tests/fixtures/spec_hashes_before_roles.json holds both,
written by that version: the hash, and the sha256 of the resolved spec's JSON as `tbuild specs`/spec.yaml dump it,
the checkout's path written as REPO. The architecture hashes are also 888ee3e's, where the redesign began."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tbuild.builder import load_spec
from tests.conftest import REPO

# Decode fields added since the fixture was written, at their defaults (None in a profile): a spec that does not
# set them resolves as before.
ADDED = {"stopping": "exact", "patience": 2.0}
# Decode settings changed on purpose since: the Multi30k recipe stops by patience (chosen on validation,
# docs/decoding.md), and the en→fr spec that carries the recipe over as it is.
CHANGED = {path: {"stopping": "patience"} for path in ("specs/multi30k.yaml", "specs/multi30k-fr-tuned.yaml")}
BEFORE = json.loads((REPO / "tests" / "fixtures" / "spec_hashes_before_roles.json").read_text())


@pytest.mark.parametrize("path", sorted(BEFORE))
def test_a_spec_resolves_as_before(path: str) -> None:
    spec = load_spec(REPO / path).spec
    dump = spec.model_dump(mode="json", exclude={"extends"})
    for field, value in CHANGED.get(path, {}).items():
        assert dump["decode"][field] == value
        dump["decode"][field] = ADDED[field]
    for settings in [dump["decode"], *dump["decode"]["profiles"].values()]:
        for field, default in ADDED.items():
            if settings.get(field) in (default, None):
                del settings[field]
    text = json.dumps(dump, sort_keys=True).replace(str(REPO), "REPO")  # data paths resolve under the checkout
    resolved = hashlib.sha256(text.encode()).hexdigest()[:16]
    assert {"architecture": spec.architecture_hash(), "resolved": resolved} == BEFORE[path]


def test_every_spec_is_compared() -> None:
    assert len(BEFORE) == 69
    assert all(Path(REPO / p).is_file() for p in BEFORE)
