"""What a run was trained on, recorded in its run directory (``hardware.jsonl``, one line per training
call: a run resumed elsewhere has several) and read back by the model card."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import torch

HARDWARE_FILE = "hardware.jsonl"
ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")  # the ones tbuild's speed depends on


def machine_facts(device: torch.device, precision_note: str, world: int) -> dict:
    """CPU model, cores and ISA flags, torch threads, the device (and GPU name) and the precision chosen."""
    cpu, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                cpu = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
                break
    except OSError:
        pass
    facts = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "cpu": cpu, "cores": os.cpu_count(),
             "isa": [f for f in ISA_FLAGS if f in flags], "threads": torch.get_num_threads(),
             "device": device.type, "processes": world, "torch": torch.__version__, "precision": precision_note}
    if device.type == "cuda":
        facts["gpu"] = torch.cuda.get_device_name(device)
    return facts


def record_machine(run_dir: Path, facts: dict) -> None:
    """Append this training call's facts (a line either appears whole or, if killed mid-write, is
    skipped when read)."""
    with open(run_dir / HARDWARE_FILE, "a", encoding="utf-8") as f:
        f.write(json.dumps(facts) + "\n")


def read_machines(run_dir: Path) -> list[dict]:
    """Every training call's facts, oldest first; unreadable lines are skipped."""
    path = run_dir / HARDWARE_FILE
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def describe_machine(facts: dict) -> str:
    """One line: ``AMD EPYC (avx2, avx512_bf16), 2 cores, 1 thread, cpu, precision auto → bf16 (…)``."""
    isa = f" ({', '.join(facts.get('isa') or [])})" if facts.get("isa") else ""
    where = facts.get("gpu") or facts.get("device", "?")
    procs = f", {facts['processes']} processes" if facts.get("processes", 1) > 1 else ""
    return (f"{facts.get('cpu', '?')}{isa}, {facts.get('cores', '?')} cores, {facts.get('threads', '?')} threads, "
            f"{where}{procs}; {facts.get('precision', '')}")
