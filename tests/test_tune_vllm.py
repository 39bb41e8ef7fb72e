"""eaglehub tune on the real SmolLM2 pair in vLLM: one small --check run (k 0-2 at concurrency 1 and 2, three
repeats, one prompt per category), shared by the tests below; then plans made from its saved costs and
acceptance with no engine, and the schedule held to vLLM's own schedule code."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest
from helpers.paths import FIXTURE, ROOT

from eaglehub.io.schemas import schema_errors
from eaglehub.measure.curve import AcceptanceCurve
from eaglehub.tune.costs import CostModel
from eaglehub.tune.schedule import best_schedule

pytestmark = [pytest.mark.vllm, pytest.mark.real]


def _tune(*args: object) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "eaglehub", "tune", "--target", "smollm2", "--drafter", str(FIXTURE), *map(str, args)]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    out = tmp_path_factory.mktemp("tune")
    res = _tune("--max-k", 2, "--concurrency", "1,2", "--repeats", 3, "--limit", 1, "--max-tokens", 16, "--check",
                "--report", out / "r.json", "--plot", out / "p.png", "--save-costs", out / "c.json")  # fmt: skip
    assert res.returncode in (0, 1), res.stderr[-3000:]
    return out, res, json.loads((out / "r.json").read_text())


def test_tune_measures_every_cell_and_the_schedule_is_lossless(tuned):
    out, res, report = tuned
    assert schema_errors(report, "tune-report") == []
    assert report["settings"]["interleaved"] is True  # vLLM's CPU build: every engine live, one pass each in turn
    assert [e["k"] for e in report["engines"]][:3] == [0, 1, 2]
    assert {(g["k"], g["concurrency"]) for g in report["grid"]} == {(k, c) for k in (0, 1, 2) for c in (1, 2)}
    for g in report["grid"]:
        m = g["measured"]
        assert m["repeats"] == 3 and 0 < m["min"] <= m["median"] <= m["max"]
        assert g["predicted"] > 0 and g["error"] == pytest.approx(g["predicted"] / m["median"] - 1)
    # every cost cell fitted, with its residual against its own measurement
    cells = report["costs"]["model"]["cells"]
    assert {(c["batch"], c["k"]) for c in cells} >= {(b, k) for b in (1, 2) for k in (0, 1, 2)}
    for c in cells:
        assert c["residual"] == pytest.approx(c["mean_ms"] / c["predicted_ms"] - 1)
    # the target's own forwards over n = 1 .. K + 1 tokens, timed behind a cached prefix, fix c
    targets = report["costs"]["model"]["target_cells"]
    assert {(t["batch"], t["tokens"]) for t in targets} == {(b, n) for b in (1, 2) for n in (1, 2, 3)}
    assert all(t["repeats"] == 3 and t["mean_ms"] > 0 for t in targets)
    assert set(report["costs"]["model"]["target_fit_ms"]) == {"x0", "x1", "c"}
    # the curve at k=2 and its check against the direct run at k=1
    curve = AcceptanceCurve.from_dict(report["acceptance"]["curve"])
    assert curve.k == 2 and curve.prompts == 6 and curve.num_drafts > 0
    (row,) = report["acceptance"]["check"]
    assert row["k"] == 1 and row["predicted"] == pytest.approx(curve.al(1))
    assert 1.0 < row["direct"] < 2.0 and row["num_drafts"] > 0
    # the check: every level judged, greedy outputs under the schedule identical to the target alone's
    chk = report["check"]
    assert [lv["concurrency"] for lv in chk["levels"]] == [1, 2]
    assert chk["lossless"]["compared"] == 3 * (6 + 6) and chk["lossless"]["identical"] == chk["lossless"]["compared"]
    assert report["notes"] and "CPU" in report["notes"][0]
    assert (out / "p.png").read_bytes()[:4] == b"\x89PNG"
    assert res.stdout.rstrip().splitlines()[-4].startswith(("OK", "FAILED"))
    # the serve line is one line, and its config is what the report says
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("vllm serve"))
    argv = shlex.split(line)
    if report["schedule"]["speculative_config"] is not None:
        assert json.loads(argv[argv.index("--speculative-config") + 1]) == report["schedule"]["speculative_config"]


def test_a_plan_from_the_saved_costs_and_acceptance_needs_no_engine_and_vllm_reads_it_alike(tuned):
    out, _, report = tuned
    res = _tune("--costs", out / "c.json", "--acceptance", out / "r.json", "--max-batch", 256,
                "--report", out / "plan.json")  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    plan = json.loads((out / "plan.json").read_text())
    assert plan["engines"] == []
    costs = CostModel.from_dict(json.loads((out / "c.json").read_text()))
    curve = AcceptanceCurve.from_dict(report["acceptance"]["curve"])
    expected = best_schedule(curve, costs, 256, 2)
    assert plan["schedule"]["ranges"] == expected.ranges
    assert plan["schedule"]["best_k"][:2] == report["schedule"]["best_k"]
    # vLLM's own code expands the ranges to the k it uses at every batch size: eaglehub's reading is the same
    from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

    config = plan["schedule"]["speculative_config"]
    if config is None:  # speculation never pays on this machine: the line serves the target alone
        assert "--speculative-config" not in plan["schedule"]["serve_command"]
        return
    served = plan["schedule"]["recommendation"]["served_ranges"]
    if plan["schedule"]["recommendation"]["kind"] == "schedule":
        assert served == expected.ranges
    ranges = config.get("num_speculative_tokens_per_batch_size", [[1, 256, config["num_speculative_tokens"]]])
    assert ranges == served or len(served) == 1
    dense = build_dynamic_sd_schedule_lookup(ranges, 512, config["num_speculative_tokens"])
    last = served[-1][2]  # vLLM carries the last range's k past its end
    want = [next((k for a, z, k in served if a <= b <= z), last) for b in range(1, 513)]
    assert [dense[b] for b in range(1, 513)] == want
