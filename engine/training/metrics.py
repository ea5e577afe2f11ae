"""metrics.jsonl (training) and valid.jsonl (validation) in the run directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TRAIN_FILE = "metrics.jsonl"
VALID_FILE = "valid.jsonl"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a JSON-lines file; a torn last line (process killed mid-write) is skipped."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


class MetricsLog:
    def __init__(self, run_dir: Path) -> None:
        self.train_path, self.valid_path = run_dir / TRAIN_FILE, run_dir / VALID_FILE

    def truncate_after(self, step: int) -> None:
        """Forget records past ``step`` (written after the checkpoint a resumed run starts from)."""
        for path in (self.train_path, self.valid_path):
            kept = [r for r in read_jsonl(path) if r.get("step", 0) <= step]
            if path.exists():
                path.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")

    def _append(self, path: Path, record: dict[str, Any]) -> None:
        with path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    def write_train(self, record: dict[str, Any]) -> None:
        self._append(self.train_path, record)

    def write_valid(self, record: dict[str, Any]) -> None:
        self._append(self.valid_path, record)
