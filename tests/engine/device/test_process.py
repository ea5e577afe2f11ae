"""Process settings belong to the entry point: library code (training, decoding) changes none."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import REPO, tiny_train_spec

PROBE = r"""
import sys, torch, yaml
from tbuild.builder import load_spec
from tbuild.engine.decoding.request import DecodeRequest
from tbuild.engine.decoding.native import load_native_engine, translate
from tbuild.engine.run.directory import resolve_run
from tbuild.engine.training.run import train_spec as train

def state():
    # a denormal survives a multiplication unless denormals are flushed
    return torch.get_num_threads(), float(torch.tensor([1e-40]) * 1.0) != 0.0

torch.set_num_threads(1)
before = state()
train(load_spec(yaml.safe_load(open(sys.argv[1]))), lambda kind, data: None)
translate(load_native_engine(resolve_run(__import__("pathlib").Path(sys.argv[2]))), ["A dog."],
          DecodeRequest.of(load_spec(yaml.safe_load(open(sys.argv[1]))).spec.decode))
print(before, state())
assert state() == before == (1, True), (before, state())
"""


def test_training_and_decoding_change_no_process_settings(tiny_corpus: Path, tmp_path: Path) -> None:
    spec = tiny_train_spec(tiny_corpus, tmp_path / "run", max_steps=2, validate_every=2)
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    done = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "spec.yaml"), str(tmp_path / "run")],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_configure_process_sets_threads_and_flushes_denormals() -> None:
    code = ("import torch; from tbuild.engine.device.process import configure_process; s = configure_process(1); "
            "assert torch.get_num_threads() == 1 and s.threads == 1; "
            "assert float(torch.tensor([1e-40]) * 1.0) == 0.0")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
