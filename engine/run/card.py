"""A run's model card: Markdown (with the Hugging Face hub's YAML front matter) saying what the model
is (the resolved spec as a table, parameters, FLOPs per token, the architecture as a mermaid chart),
its data and tokenizer, its training (steps, time, device, precision, lineage), its results (every
``eval_<split>.json`` with its sacreBLEU signatures), export parity where checked, its decoding
settings, and its intended use and limits. Everything is read from the run directory."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tbuild.builder.diagram import diagram, mermaid
from tbuild.builder.inspect import inspect_model

from .directory import TOKENIZERS_FILE, TRAIN_FILE, VALID_FILE, Run, read_jsonl
from .machine import describe_machine, read_machines

CARD = "README.md"


@dataclass(frozen=True)
class TaskCard:
    """What a run's task says on its card (``Task.card``): the hub's pipeline tag, what the model does
    (``{source}`` and ``{target}``: the languages), what its outputs are called, and its results section's lines
    (None: the translation table of sacreBLEU's scores)."""

    pipeline: str = "translation"
    does: str = "translating {source} → {target}"
    outputs: str = "translations"
    results: Callable[[Run], list[str]] | None = None


TRANSLATION = TaskCard()


def _flat(data: Any, prefix: str = "") -> list[tuple[str, str]]:
    if isinstance(data, dict) and data:
        return [row for key, value in data.items() for row in _flat(value, f"{prefix}.{key}" if prefix else key)]
    return [(prefix, json.dumps(data) if isinstance(data, list | dict) else str(data))]


def _json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _dataset(run: Run) -> str:
    """The data set's name as the card shows it."""
    dataset = run.spec.data.dataset
    return "its own files" if dataset is None else f"{dataset.kind}"


def _model(run: Run, task: TaskCard) -> list[str]:
    spec = run.spec
    report = inspect_model(spec)
    rows = "\n".join(f"| `model.{k}` | `{v}` |" for k, v in _flat(spec.model.model_dump(mode="json")))
    return [
        "## Model", "",
        f"A Transformer encoder-decoder (Vaswani et al., 2017) "
        f"{task.does.format(source=spec.data.source_lang, target=spec.data.target_lang)}, built and trained by "
        "tbuild from a YAML spec.", "",
        f"- parameters: {report.total:,} ({report.non_embedding:,} without embeddings)",
        f"- forward FLOPs per token (n={report.context}): {report.flops_per_token:,}",
        f"- weights: {4 * report.total / 2**20:,.1f} MiB in float32", "",
        "```mermaid", mermaid(diagram(spec, report, spec.name)).rstrip(), "```", "",
        "<details><summary>The resolved model spec</summary>", "", "| field | value |", "| --- | --- |", rows, "",
        "</details>", "",
    ]


def _data(run: Run) -> list[str]:
    data, tok = run.spec.data, run.spec.data.tokenizer
    lines = ["## Data", "", "Paths are relative to the run directory.", "", "| | |", "| --- | --- |",
             f"| data set | {_dataset(run)} |"]
    for split in ("train", "valid", "test"):
        header = _json(run.dir.prepared(split) / "header.json")
        size = f" ({header['pairs']:,} pairs)" if header and "pairs" in header else ""
        if header and header.get("variants"):  # data.tokenizer.sampling: the split encoded K times, stacked
            low, high = min(header["variants"]), max(header["variants"])
            size = f" ({low:,}{f' to {high:,}' if high > low else ''} pairs in each of {len(header['variants'])} " \
                "sampled encodings)"
        where = getattr(data, split, None)
        shown = os.path.relpath(where, run.dir.path.resolve()) if where and Path(where).is_absolute() else where
        lines.append(f"| {split} | `{shown}`{size} |")
    digest = hashlib.sha256(run.tokenizer.read_bytes()).hexdigest() if run.dir.tokenizer.is_file() else "—"
    kind = "Hugging Face tokenizers file" if run.dir.tokenizer.name == TOKENIZERS_FILE else f"sentencepiece {tok.kind}"
    lines += [f"| max length | {data.max_length} tokens |",
              f"| tokenizer | {kind}, vocabulary {run.spec.model.vocab_size} (shared), "
              f"sha256 `{digest[:16]}…` |", ""]
    return lines


def _training(run: Run) -> list[str]:
    train = run.spec.train
    steps = read_jsonl(run.dir.path / TRAIN_FILE)
    valid = read_jsonl(run.dir.path / VALID_FILE)
    lines = ["## Training", ""]
    if steps:
        last = steps[-1]
        lines += [f"- steps: {last['step']:,} (epoch {last.get('epoch', '?')}), "
                  f"{last.get('elapsed', 0) / 60:,.1f} minutes, {last.get('tokens_per_s', 0):,.0f} tokens/s at the end",
                  f"- final training loss {last.get('loss', float('nan')):.3f}, perplexity {last.get('ppl', 0):,.2f}"]
    else:
        lines.append("- not trained yet (no metrics.jsonl)")
    best = min((v["ppl"] for v in valid if "ppl" in v), default=None)
    if best is not None:
        lines.append(f"- best validation perplexity: {best:,.2f}")
    lines += [f"- batch: {train.batch_tokens:,} tokens, schedule {train.schedule.kind}, label smoothing "
              f"{train.label_smoothing}, seed {train.seed}",
              f"- precision: {train.precision}; threads: {train.threads or 'all cores'}"]
    machines = read_machines(run.dir.path)
    lines += [f"- hardware: {describe_machine(m)}" for m in _distinct(machines)] or [
        "- hardware: not recorded (trained before tbuild wrote hardware.jsonl)"]
    lineage = _json(run.dir.path / "init.json")
    if lineage:
        lines.append(f"- fine-tuned from `{lineage.get('from')}` ({lineage.get('name')}, step {lineage.get('step')}, "
                     f"weights {lineage.get('weights')}); frozen: {', '.join(lineage.get('frozen') or []) or 'none'}")
    return [*lines, ""]


def _distinct(machines: list[dict]) -> list[dict]:
    """Each machine a run was trained on once (training calls differ only in time)."""
    seen, out = set(), []
    for m in machines:
        key = json.dumps({k: v for k, v in m.items() if k != "time"}, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(m)
    return out


def _results(run: Run, exports: tuple[Path, ...], task: TaskCard) -> list[str]:
    lines = ["## Results", ""]
    evals = [e for e in run.dir.evals() if e.bleu is not None]  # translation scores (a parsing run's are EVALB's)
    if task.results is not None:
        lines += task.results(run)
    elif not evals:
        lines += ["Not evaluated yet: `tbuild evaluate RUN --split test` writes the scores this card shows.", ""]
    else:
        lines += ["| split | sentences | BLEU | chrF | perplexity | beam | α | engine | signature |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
        lines += [f"| {e.split} | {e.sentences:,} | {e.bleu:.2f} | {e.chrf:.2f} | {e.perplexity:.2f} | "
                  f"{e.beam} | {e.alpha} | {e.engine} | `{e.bleu_signature}` |" for e in evals]
        lines += ["", "chrF signatures: " + ", ".join(f"`{e.chrf_signature}`" for e in evals[:1]), ""]
    folders = dict.fromkeys([*sorted(run.dir.path.glob("export/*")), *exports])  # in order, once each
    parities = [(f.name, _json(f / "parity.json")) for f in folders if (f / "parity.json").is_file()]
    if parities:
        lines += ["### Export parity", "", "| export | sentences | BLEU tbuild | BLEU export | identical lines | "
                  "identical (greedy) |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
        lines += [f"| {name} | {p['sentences']} | {p['bleu_tbuild']:.2f} | {p['bleu_export']:.2f} | "
                  f"{100 * p['identical']:.1f}% | {100 * p['identical_greedy']:.1f}% |" for name, p in parities if p]
        lines.append("")
    return lines


def _use(run: Run, task: TaskCard) -> list[str]:
    d, data = run.spec.decode, run.spec.data
    return [
        "## Decoding", "",
        f"Beam {d.beam}, length penalty α {d.alpha}, output length ≤ {d.max_len_a}·|source| + {d.max_len_b}, "
        f"precision {d.precision}, quantization {d.quantization}. `tbuild decode RUN` or `tbuild serve RUN`.", "",
        "## Intended use and limits", "",
        f"- Research and teaching: {data.source_lang} → {data.target_lang} sentences resembling the training data "
        f"({_dataset(run)}); quality outside that domain is unknown and likely much lower.",
        f"- One sentence at a time, at most {run.spec.model.max_positions or 1024} source tokens; longer input is "
        "refused by the server and truncated by `tbuild decode`.",
        f"- Not for decisions about people or for safety-critical use; {task.outputs} can be fluent and wrong, "
        "and reproduce biases of the training data.", "",
    ]


def model_card(run: Run, exports: tuple[Path, ...] = (), task: TaskCard = TRANSLATION) -> str:
    """The card of ``run`` as Markdown, as its ``task`` tells it; the parity of its exports in RUN/export/ and in
    ``exports``."""
    spec = run.spec
    front = ["---", f"language: [{', '.join(dict.fromkeys((spec.data.source_lang, spec.data.target_lang)))}]",
             f"tags: [{task.pipeline}, transformer, tbuild]", f"pipeline_tag: {task.pipeline}", "---", ""]
    title = [f"# {spec.name or run.dir.path.name}", ""]
    return "\n".join(front + title + _model(run, task) + _data(run) + _training(run) + _results(run, exports, task)
                     + _use(run, task))


def write_card(run: Run, path: Path, exports: tuple[Path, ...] = (), task: TaskCard = TRANSLATION) -> None:
    """Write ``run``'s card to ``path``."""
    from ..files import atomic_write

    atomic_write(path, model_card(run, exports, task).encode())
