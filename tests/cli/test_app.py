"""The CLI end to end: exit codes and output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml
from typer.testing import CliRunner

from tbuild.cli.app import app
from tests.conftest import REPO

runner = CliRunner()


def test_inspect_big_prints_218m() -> None:
    result = runner.invoke(app, ["inspect", str(REPO / "specs/big.yaml")], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    assert "218,300,416" in result.output and "218.3M" in result.output


def test_inspect_with_overrides_and_json() -> None:
    result = runner.invoke(app, ["inspect", str(REPO / "specs/base.yaml"), "--set", "model.encoder.layers=2",
                                 "--set", "model.decoder.layers=2", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["total"] == 65110016 - 4 * 3152384 - 4 * 4204032
    assert report["memory_bytes"]["bf16"] == 2 * report["total"]
    assert report["non_embedding"] == report["total"] - 40960 * 512


def test_validate_prints_resolved_spec() -> None:
    result = runner.invoke(app, ["validate", str(REPO / "specs/paper/B-dk16.yaml")])
    assert result.exit_code == 0, result.output
    assert "d_k: 16" in result.output and "d_v: 64" in result.output and "extends" not in result.output


def test_bad_spec_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  encoder:\n    layres: 2\n")
    result = runner.invoke(app, ["inspect", str(bad)], env={"COLUMNS": "60"})
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert f"{bad}:3:5: model.encoder.layres: unknown key 'layres' (did you mean 'layers'?)" in lines[0]


def test_schema_and_components() -> None:
    schema = runner.invoke(app, ["schema"])
    assert schema.exit_code == 0
    assert "multihead" in json.dumps(json.loads(schema.output)["$defs"])
    listing = runner.invoke(app, ["components"], env={"COLUMNS": "200"})
    assert listing.exit_code == 0
    for kind in ("multihead", "sinusoidal", "learned", "relu", "layernorm"):
        assert kind in listing.output


def test_component_reference_is_current() -> None:
    from tbuild.cli.specs import components_markdown

    readme = (REPO / "docs" / "components.md").read_text()
    start = readme.index("<!-- components:start")
    body = readme[readme.index("\n", start) + 1: readme.index("<!-- components:end -->")]
    assert body == components_markdown(), "regenerate with `tbuild components --markdown`"


def test_readme_commands_exist() -> None:
    readme = (REPO / "README.md").read_text()
    assert "bash scripts/multi30k.sh" in readme and "bash scripts/test.sh" in readme
    assert "bash scripts/test.sh" in (REPO / ".ci/run").read_text()


def test_validate_and_inspect_say_which_export_targets_fit() -> None:
    ok = runner.invoke(app, ["validate", str(REPO / "specs" / "multi30k.yaml")])
    assert ok.exit_code == 0 and "# export to ctranslate2: yes\n" in ok.stdout
    # multi30k.yaml trains pre-norm: PegasusForConditionalGeneration holds it (docs/export.md)
    assert ok.stdout.rstrip().endswith("# export to hf: yes")
    for paper in ("base.yaml", "big.yaml"):  # post-norm at eps 1e-6: MarianMTModel, its stream rescaled (export/hf.py)
        base = runner.invoke(app, ["validate", str(REPO / "specs" / paper)])
        assert base.exit_code == 0 and "# export to hf: yes" in base.stdout, base.stdout
    yaml.safe_load(ok.stdout)  # still one YAML document
    relative = runner.invoke(app, ["validate", str(REPO / "specs" / "examples" / "relative.yaml"), "--json"])
    why = json.loads(relative.stdout)["export"]["ctranslate2"]
    assert why.startswith("cannot export to ctranslate2: attention kind 'relative'")
    inspected = runner.invoke(app, ["inspect", str(REPO / "specs" / "examples" / "alibi.yaml")])
    assert "export to ctranslate2: no (cannot export to ctranslate2: positional kind 'alibi'" in inspected.stdout
    assert "export to hf: no (cannot export to hf: positional kind 'alibi'" in inspected.stdout
    assert why.startswith("cannot export to ctranslate2")
    hf = json.loads(relative.stdout)["export"]["hf"]
    assert hf == ("cannot export to hf: attention kind 'relative' (encoder layer group 0 self-attention); hf supports "
                  "attention: multihead")


def test_validate_imports_no_torch() -> None:
    code = ("import sys; from typer.testing import CliRunner; from tbuild.cli.app import app; "
            f"r = CliRunner().invoke(app, ['validate', {str(REPO / 'specs' / 'big.yaml')!r}]); "
            "assert r.exit_code == 0, r.output; assert 'torch' not in sys.modules, 'torch imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
