"""The built wheel works on its own: installed into a clean virtual environment (its declared
dependencies only: no torch, no source tree on the path), it inspects, validates and converts the
bundled fixture, finds its packaged schemas and prompts, and names the extra a torch verb needs."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "smollm2-eagle3"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory):
    work = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(work), str(ROOT)],
        check=True,
        cwd=work,
    )
    (wheel,) = work.glob("eaglehub-*.whl")
    env_dir = work / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel)], check=True, cwd=work)
    return work, env_dir / "bin" / "eaglehub", py, wheel


def run(env, *args):
    work, exe, _, _ = env
    return subprocess.run([str(exe), *args], capture_output=True, text=True, cwd=work, timeout=300)


def test_wheel_ships_data_and_types(wheel_env):
    import zipfile

    names = set(zipfile.ZipFile(wheel_env[3]).namelist())
    assert "eaglehub/py.typed" in names
    assert "eaglehub/data/rules.json" in names
    assert "eaglehub/data/prompts/eval.jsonl" in names
    published = {p.name for p in (ROOT / "schemas").glob("*.schema.json")}
    assert {f"eaglehub/data/schemas/{n}" for n in published} <= names


def test_installed_package_is_not_the_checkout(wheel_env):
    _, _, py, _ = wheel_env
    out = subprocess.run(
        [str(py), "-c", "import eaglehub, importlib.util; print(eaglehub.__file__, importlib.util.find_spec('torch'))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=wheel_env[0],
    ).stdout.split()
    assert not out[0].startswith(str(ROOT)), out
    assert out[1] == "None"  # the core install does not pull torch


def test_inspect_validate_convert_from_the_wheel(wheel_env):
    work = wheel_env[0]
    inspect = run(wheel_env, "inspect", str(FIXTURE), "--json")
    assert inspect.returncode == 0, inspect.stderr
    assert json.loads(inspect.stdout)["format"] == "vllm"
    validate = run(wheel_env, "validate", str(FIXTURE), "--json")
    assert validate.returncode == 0, validate.stdout + validate.stderr
    report = json.loads(validate.stdout)
    assert report["ok"] and report["counts"]["error"] == 0
    convert = run(wheel_env, "convert", str(FIXTURE), str(work / "up"), "--to", "3.1", "--json")
    assert convert.returncode == 0, convert.stderr
    assert json.loads(convert.stdout)["version"] == "3.1"
    again = run(wheel_env, "validate", str(work / "up"), "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["ok"]
    rules = run(wheel_env, "validate", "--list-rules", "--json")
    assert rules.returncode == 0 and len(json.loads(rules.stdout)["rules"]) > 50


def test_a_torch_verb_names_the_extra(wheel_env):
    result = run(wheel_env, "verify", "--target", "smollm2", "--drafter", str(FIXTURE), "--engine", "reference")
    assert result.returncode == 2
    assert "eaglehub[torch]" in result.stderr
    assert "Traceback" not in result.stderr
