"""The spec schema: torch-free, registry-backed unions, one strict model per schedule and data set."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tbuild.builder import SpecError, load_spec
from tbuild.builder.spec import (
    DATASETS,
    SCHEDULES,
    ConstantSchedule,
    FilesDataset,
    InverseSqrtSchedule,
    Multi30kDataset,
    NoamSchedule,
    Spec,
    Wmt14Dataset,
)
from tbuild.components import ATTENTION, FFN, NORM, POSITIONAL

BUILT_IN_DATASETS = ["multi30k", "wmt14", "files", "treebank", "text", "tagging", "classification"]


def task_datasets() -> list[str]:
    """The data set kinds the tasks' folders declare (summarization's aeslc and scitldr, g2p's cmudict), in the
    order the tasks are declared: each declared with its task, after the built-in kinds."""
    return [kind for kind in DATASETS if kind not in BUILT_IN_DATASETS]


def test_schema_and_loader_import_no_torch_and_load_no_plugins() -> None:
    code = ("import sys\n"
            "import tbuild.builder.spec\n"
            "from tbuild.builder.loader import load_spec\n"
            "import tbuild.components.plugins as plugins\n"
            "assert not plugins._loaded, 'plugins loaded at import'\n"
            "load_spec({})\n"
            "load_spec({'model': {'attention': {'kind': 'relative'}}, 'data': {'dataset': 'multi30k'}})\n"
            "print('torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_json_schema_lists_registered_kinds_with_discriminator() -> None:
    schema = Spec.model_json_schema()
    defs = schema["$defs"]
    model = defs["ModelSpec"]["properties"]
    for field, registry in (("attention", ATTENTION), ("positional", POSITIONAL), ("ffn", FFN), ("norm", NORM)):
        union = model[field]
        assert union["discriminator"]["propertyName"] == "kind"
        assert set(union["discriminator"]["mapping"]) == set(registry)
        assert len(union["oneOf"]) == len(registry)
    schedule = defs["TrainSpec"]["properties"]["schedule"]
    assert set(schedule["discriminator"]["mapping"]) == set(SCHEDULES) == {"noam", "inverse_sqrt", "constant"}
    dataset = json.dumps(defs["DataSpec"]["properties"]["dataset"])
    assert '"multi30k": "#/$defs/Multi30kDataset"' in dataset
    kinds = ", ".join(f'"{k}"' for k in BUILT_IN_DATASETS + task_datasets())
    assert f'"enum": [{kinds}]' in dataset  # the built-in kinds, then those the tasks' folders declare


# ----------------------------------------------------------------------------- schedules (§5.3)


def test_schedule_rates_are_the_formulas() -> None:
    noam = NoamSchedule(warmup=4000, factor=2.0)
    for step in (1, 100, 4000, 4001, 50000):
        expected = 2.0 * 512**-0.5 * min(step**-0.5, step * 4000**-1.5)  # §5.3 Eq. 3
        assert noam.rate(step, 512) == pytest.approx(expected, rel=1e-12)
    assert noam.rate(0, 512) == noam.rate(1, 512)  # steps count from 1
    paper = NoamSchedule(warmup=4000)
    peak = max(range(1, 10000, 7), key=lambda s: paper.rate(s, 512))
    assert abs(peak - 4000) <= 7  # rises linearly for warmup steps, then decays as step^-0.5
    assert paper.rate(16000, 512) == pytest.approx(paper.rate(4000, 512) / 2)
    inv = InverseSqrtSchedule(lr=1e-3, warmup=100)
    assert inv.rate(50, 512) == pytest.approx(1e-3 * 50 / 100)  # linear warmup
    assert inv.rate(400, 512) == pytest.approx(1e-3 * (100 / 400) ** 0.5)  # lr · sqrt(warmup / step)
    assert ConstantSchedule(lr=2e-4, warmup=10).rate(5, 512) == pytest.approx(1e-4)
    assert ConstantSchedule(lr=2e-4, warmup=0).rate(7, 512) == 2e-4
    assert load_spec({}).spec.train.schedule == NoamSchedule()  # the paper's default


def test_schedule_options_of_another_kind_are_refused(tmp_path: Path) -> None:
    p = tmp_path / "s.yaml"
    p.write_text("train:\n  schedule: {kind: inverse_sqrt, factor: 2}\n")
    with pytest.raises(SpecError) as info:
        load_spec(p)
    assert str(info.value) == (f"{p}:2:34: train.schedule.factor: unknown key 'factor'; "
                               "allowed: kind, warmup, lr")
    p.write_text("train:\n  schedule: {kind: noam, lr: 0.1}\n")
    with pytest.raises(SpecError, match=r"s.yaml:2:26: train.schedule.lr: unknown key 'lr'; allowed: kind, "
                                        r"warmup, factor"):
        load_spec(p)
    p.write_text("train:\n  schedule: {kind: inverse_sqr}\n")
    with pytest.raises(SpecError, match=r"s.yaml:2:14: train.schedule.kind: unknown kind 'inverse_sqr' \(did you "
                                        r"mean 'inverse_sqrt'\?\); registered kinds: noam, inverse_sqrt, constant"):
        load_spec(p)


# ----------------------------------------------------------------------------- data sets


def test_dataset_shorthand_and_mapping(tmp_path: Path) -> None:
    assert load_spec({"data": {"dataset": "multi30k"}}).spec.data.dataset == Multi30kDataset()
    assert load_spec({"data": {"dataset": {"kind": "multi30k"}}}).spec.data.dataset == Multi30kDataset()
    assert load_spec({}).spec.data.dataset is None  # your own files, read as given
    assert load_spec({"data": {"dataset": "wmt14"}}).spec.data.dataset == Wmt14Dataset()
    assert load_spec({"data": {"dataset": "files"}}).spec.data.dataset == FilesDataset()
    p = tmp_path / "s.yaml"
    p.write_text("data:\n  dataset: wmt99\n")
    with pytest.raises(SpecError) as info:
        load_spec(p)
    assert str(info.value) == (f"{p}:2:3: data.dataset.kind: unknown kind 'wmt99' (did you mean 'wmt14'?); "
                               f"registered kinds: {', '.join(BUILT_IN_DATASETS + task_datasets())}")
    p.write_text("data:\n  dataset: {kind: multi30k, year: 2016}\n")
    with pytest.raises(SpecError, match="data.dataset.year: unknown key 'year'; allowed: kind"):
        load_spec(p)
