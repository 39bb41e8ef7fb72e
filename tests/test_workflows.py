"""The GitHub Actions workflows pass two offline linters (check-jsonschema with its vendored workflow
schema, zizmor's security audits), both run here for real and shown to fail on broken workflows;
publish.yml has the shape the README describes (typed inputs, CPU → GPU → protected publish)."""

import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
BIN = Path(sys.executable).parent


def lint(*paths: Path) -> list[subprocess.CompletedProcess]:
    """Both linters on ``paths`` (offline: zizmor's online audits off, the schema is the one check-jsonschema vendors)."""
    return [
        subprocess.run(
            [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows", *map(str, paths)],
            capture_output=True,
            text=True,
            timeout=120,
        ),
        subprocess.run(
            [str(BIN / "zizmor"), "--offline", "--no-progress", *map(str, paths)],
            capture_output=True,
            text=True,
            timeout=120,
        ),
    ]


def test_the_workflows_pass_both_linters():
    assert {p.name for p in WORKFLOWS} == {"ci.yml", "publish.yml"}
    schema, audit = lint(*WORKFLOWS)
    assert schema.returncode == 0, schema.stdout + schema.stderr
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "No findings" in audit.stdout + audit.stderr


def _broken(tmp_path: Path, name: str, edit) -> Path:
    doc = yaml.safe_load((ROOT / ".github" / "workflows" / "publish.yml").read_text())
    doc = {("on" if k is True else k): v for k, v in doc.items()}  # PyYAML reads the key `on` as true
    edit(doc)
    path = tmp_path / ".github" / "workflows" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_the_linters_fail_on_broken_workflows(tmp_path):
    # an input spliced into a shell script is a template injection (zizmor), the schema still passes
    def inject(doc):
        doc["jobs"]["prepare"]["steps"][3]["run"] = 'eaglehub validate "${{ inputs.source }}"'

    schema, audit = lint(_broken(tmp_path, "inject.yml", inject))
    assert schema.returncode == 0 and audit.returncode != 0
    assert "template-injection" in audit.stdout + audit.stderr

    # a job without runs-on, an input of an unknown type: the workflow schema refuses both
    def malformed(doc):
        del doc["jobs"]["publish"]["runs-on"]
        doc["on"]["workflow_dispatch"]["inputs"]["scheme"]["type"] = "enum"

    schema, _ = lint(_broken(tmp_path, "malformed.yml", malformed))
    assert schema.returncode != 0
    assert "publish.yml" not in schema.stdout and "malformed.yml" in schema.stdout + schema.stderr


def test_publish_workflow_shape():
    doc = yaml.safe_load((ROOT / ".github" / "workflows" / "publish.yml").read_text())
    trigger = doc[True]  # PyYAML reads the key `on` as the boolean true
    inputs = trigger["workflow_dispatch"]["inputs"]
    assert {
        k: v["type"] for k, v in inputs.items() if k in ("source", "target", "target_repo", "scheme", "dry_run")
    } == {
        "source": "string",
        "target": "string",
        "target_repo": "string",
        "scheme": "choice",
        "dry_run": "boolean",
    }
    assert inputs["dry_run"]["default"] is True and inputs["scheme"]["default"] == "fp8-dynamic"
    assert doc["permissions"] == {}
    jobs = doc["jobs"]
    assert list(jobs) == ["prepare", "verify", "publish"]
    assert jobs["prepare"]["runs-on"] == "ubuntu-latest"
    assert jobs["verify"]["runs-on"][0] == "self-hosted" and jobs["verify"]["needs"] == "prepare"
    assert any("eaglehub verify" in s.get("run", "") and "--engine vllm" in s["run"] for s in jobs["verify"]["steps"])
    pub = jobs["publish"]
    assert pub["environment"] == "hf-publish" and pub["permissions"]["id-token"] == "write" and pub["needs"] == "verify"
    runs = [s.get("run", "") for s in pub["steps"]]
    plan = next(i for i, r in enumerate(runs) if "--dry-run" in r)
    real = next(i for i, r in enumerate(runs) if "eaglehub publish" in r and "--dry-run" not in r)
    assert plan < real and "--parent-commit" in runs[real] and "GITHUB_STEP_SUMMARY" in runs[plan]
    ci = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    assert set(ci["jobs"]) == {"lint", "test"}
    assert any("zizmor" in s.get("run", "") for s in ci["jobs"]["lint"]["steps"])
    assert "bash .ci/run" in [s.get("run") for s in ci["jobs"]["test"]["steps"]]


def test_ci_runs_the_static_checks_before_the_tests():
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert lines.index("make lint") < lines.index("make test")
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\nlint:", 1)[1].split("\n\n", 1)[0]
    for command in ("$(BIN)/ruff check .", "$(BIN)/ruff format --check .", "$(BIN)/mypy"):
        assert command in recipe
    ci = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    runs = "\n".join(s.get("run", "") for s in ci["jobs"]["lint"]["steps"])
    assert "ruff check ." in runs and "ruff format --check ." in runs
