"""`tbuild validate`, `tbuild schema`, `tbuild components`: looking at specs and blocks."""

from __future__ import annotations

import json
from pathlib import Path

import typer
import yaml
from rich.table import Table

from .common import console, guarded, load
from .options import SET_OPTION, SPEC_TARGET


@guarded
def validate(
    spec: Path = SPEC_TARGET,
    set_: list[str] = SET_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of YAML."),
) -> None:
    """Check a spec and print it fully resolved (extends merged, overrides applied, defaults filled),
    then which export targets can hold its model and honour its decode profiles (as YAML comments, or
    "export" and "decode_profiles" keys in JSON)."""
    from tbuild.engine.export.targets import describe_profiles, describe_targets, export_targets, profile_verdicts

    loaded = load(spec, set_).spec
    resolved = loaded.model_dump(mode="json", exclude={"extends"})
    if as_json:
        print(json.dumps(resolved | {"export": export_targets(loaded), "decode_profiles": profile_verdicts(loaded)},
                         indent=2))
    else:
        print(yaml.safe_dump(resolved, sort_keys=False, allow_unicode=True), end="")
        print("".join(f"# {line}\n" for line in describe_profiles(loaded)), end="")
        print("".join(f"# export to {line}\n" for line in describe_targets(loaded)), end="")


def schema() -> None:
    """Print the JSON Schema of specs (point your editor's YAML support at it)."""
    from tbuild.builder.spec import Spec

    print(json.dumps(Spec.model_json_schema(), indent=2))


def components_markdown() -> str:
    """The registered blocks as Markdown (docs/components.md holds this text)."""
    from tbuild.components import REGISTRIES, load_plugins

    load_plugins()
    out = []
    for name, registry in REGISTRIES.items():
        out.append(f"#### {name}\n\n| kind | what it is | fields |\n| --- | --- | --- |")
        for entry in registry.entries():
            doc = " ".join((entry.spec.__doc__ or "").split()).replace("|", "\\|")
            fields = []
            for fname, f in entry.spec.model_fields.items():
                if fname != "kind":
                    default = "" if f.is_required() else f" = {f.default!r}"
                    fields.append(f"`{fname}{default}`: {f.description or ''}".replace("|", "\\|"))
            out.append(f"| `{entry.key}` | {doc} | {'<br>'.join(fields) or '—'} |")
        out.append("")
    return "\n".join(out + _order_markdown())


def _order_rows() -> list[tuple[str, str, str, str]]:
    """The layer orders (``order`` of a stack or group: components/specs/order.py): preset, what it is, its
    encoder (or decoder-only) layer, an encoder-decoder's decoder layer."""
    from tbuild.components.specs.order import PRESETS

    return [(p.name, p.summary, p.plain, p.attending) for p in PRESETS.values()]


def _order_markdown() -> list[str]:
    head = ["#### order", "", "A stack's or layer group's `order` (`model.encoder.order`, `model.decoder.order`, "
            "`groups[i].order`): one of these or letters a (self-attention), c (cross-attention), f (feed-forward).",
            "", "| preset | what it is | encoder / decoder_only layer | encoder_decoder's decoder layer |",
            "| --- | --- | --- | --- |"]
    rows = [f"| `{name}` | {what} | `{plain}` | `{attending}` |" for name, what, plain, attending in _order_rows()]
    return head + rows + [""]


def components(
    markdown: bool = typer.Option(False, "--markdown", help="Print Markdown (as in docs/components.md)."),
) -> None:
    """List every registered block with its spec fields and their help."""
    from tbuild.components import REGISTRIES, load_plugins

    if markdown:
        print(components_markdown(), end="")
        return
    load_plugins()
    for name, registry in REGISTRIES.items():
        table = Table(title=f"{name}", title_justify="left", show_lines=False)
        table.add_column("kind", style="bold")
        table.add_column("what it is")
        table.add_column("fields")
        for entry in registry.entries():
            doc = " ".join((entry.spec.__doc__ or "").split())
            fields = []
            for fname, f in entry.spec.model_fields.items():
                if fname == "kind":
                    continue
                default = "" if f.is_required() else f" = {f.default!r}"
                fields.append(f"{fname}{default}: {f.description or ''}")
            origin = "" if entry.origin == "tbuild" else f" [dim](plugin {entry.origin})[/]"
            table.add_row(entry.key + origin, doc, "\n".join(fields) or "—")
        console.print(table)
    table = Table(title="order (a stack's or group's layer: presets, or letters a, c, f)", title_justify="left")
    for column in ("preset", "what it is", "encoder / decoder_only", "encoder_decoder's decoder"):
        table.add_column(column)
    for row in _order_rows():
        table.add_row(*row)
    console.print(table)
