"""``verify`` under production features (eaglehub.verify.production): options, their checks, what reaches vLLM,
the classification of divergences and the report section; the real run on the fixture pair is
test_verify_production_vllm.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.paths import FIXTURE

from eaglehub.cli import main
from eaglehub.engines.base import RunResult, RunSpec, SpecCounters
from eaglehub.engines.vllm_engine import build_request, llm_kwargs, serve_command
from eaglehub.errors import UsageError
from eaglehub.verify import production
from eaglehub.verify.findings import _lossless_findings
from eaglehub.verify.options import VerifyOptions

SCHEDULE = "[[5, 16, 2], [1, 4, 3]]"


def test_k_schedule_is_read_and_checked_as_vllm_does():
    # sorted by first batch size, as vLLM normalises it (v1/spec_decode/dynamic/utils.py L57)
    assert production.parse_k_schedule(SCHEDULE) == [[1, 4, 3], [5, 16, 2]]
    assert production.parse_k_schedule(None) is None
    bad = {
        "[[1, 4, 3]": "--k-schedule is not JSON",
        "[]": "is not a non-empty list",
        "[[2, 4, 3]]": "must start at batch size 1",
        "[[1, 4, 3], [4, 8, 2]]": "must start at batch size 1 without overlaps",
        "[[1, 4, -1]]": "not a positive range with k >= 0",
        "[[1, 4]]": "is not [first, last, k]",
    }
    for text, message in bad.items():
        with pytest.raises(UsageError, match=message.replace("[", r"\[")):
            production.parse_k_schedule(text)


def _opts(**kw) -> VerifyOptions:
    return VerifyOptions(target="smollm2", drafters=[str(FIXTURE)], **kw)


def test_features_reach_llm_and_the_schedule_only_the_drafter_run():
    opts = _opts(
        prefix_caching=False,
        chunked_prefill=True,
        max_num_batched_tokens=64,
        in_flight=8,
        k_schedule=[[1, 4, 3], [5, 16, 2]],
        engine_options={"tensor_parallel_size": 1},
    )
    options = production.engine_options(opts)
    assert options == {
        "tensor_parallel_size": 1,
        "enable_prefix_caching": False,
        "enable_chunked_prefill": True,
        "max_num_batched_tokens": 64,
        "max_num_seqs": 8,
        "num_speculative_tokens_per_batch_size": [[1, 4, 3], [5, 16, 2]],
    }
    target = Path("/models/t")
    alone = llm_kwargs(
        build_request(RunSpec(target, None, 3, 16, engine_options=options, one_batch=True), [[1]], ["a"], 1)
    )
    assert (alone["enable_prefix_caching"], alone["enable_chunked_prefill"]) == (False, True)
    assert (alone["max_num_batched_tokens"], alone["max_num_seqs"]) == (64, 8)
    assert "speculative_config" not in alone and "num_speculative_tokens_per_batch_size" not in alone
    req = build_request(RunSpec(target, FIXTURE, 3, 16, engine_options=options, one_batch=True), [[1]], ["a"], 1)
    assert req["one_batch"] is True
    spec = llm_kwargs(req)
    assert spec["speculative_config"] == {
        "method": "eagle3",
        "model": str(FIXTURE.resolve()),
        "num_speculative_tokens": 3,
        "num_speculative_tokens_per_batch_size": [[1, 4, 3], [5, 16, 2]],
    }
    assert "num_speculative_tokens_per_batch_size" not in spec and spec["max_num_seqs"] == 8
    line = serve_command(target, FIXTURE, 3, k_schedule=[[1, 4, 3], [5, 16, 2]])
    assert '"num_speculative_tokens_per_batch_size": [[1, 4, 3], [5, 16, 2]]' in line
    # nothing asked: nothing passed, vLLM's defaults stand
    assert production.engine_options(_opts()) == {} and not production.any_requested(_opts())


@pytest.mark.parametrize(
    "kw, engines, message",
    [
        (
            {"in_flight": 4},
            ["reference"],
            "--concurrency sets a vLLM engine feature; the reference engine has no such feature",
        ),
        ({"in_flight": 4, "engine_options": {"max_num_seqs": 2}}, ["vllm"], "--max-num-seqs says 2"),
        ({"chunked_prefill": False, "max_num_batched_tokens": 64}, ["vllm"], "below max_model_len 2048"),
        ({"max_num_batched_tokens": 4, "in_flight": 8}, ["vllm"], "below max_num_seqs 8"),
    ],
)
def test_features_vllm_would_refuse_or_ignore_are_refused(kw, engines, message):
    with pytest.raises(UsageError, match=message):
        production.check_features(_opts(**kw), engines)
    production.check_features(_opts(), engines)  # no feature asked: nothing to refuse


def test_cli_options_and_their_usage_errors(tmp_path):
    res = CliRunner().invoke(main, ["verify", "--help"], terminal_width=200)
    for name in ("--prefix-caching / --no-prefix-caching", "--chunked-prefill / --no-chunked-prefill",
                 "--max-num-batched-tokens", "--k-schedule", "--concurrency"):  # fmt: skip
        assert name in res.output
    base = ["verify", "--target", "smollm2", "--drafter", str(FIXTURE)]
    cases = [
        (["--k-schedule", "[[2, 4, 3]]"], "--k-schedule: schedule [[2, 4, 3]] must start at batch size 1"),
        (
            ["--engine", "reference", "--concurrency", "4"],
            "--concurrency sets a vLLM engine feature; the reference engine has no such feature",
        ),
        (
            ["--engine", "reference", "--concurrency", "4", "--no-prefix-caching"],
            "set vLLM engine features; the reference engine has none of them",
        ),
        (["--endpoint", "http://127.0.0.1:9", "--prefix-caching"], "--endpoint measures a server started"),
        (["--dry-run", "--k-schedule", "[[1, 8, 2]]"], "--dry-run runs nothing"),
    ]
    for extra, message in cases:
        args = base[:3] + extra if "--endpoint" in extra else base + extra
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 2, (extra, res.output)
        assert message in " ".join(res.output.split()), res.output


def _config(hits: list[int], schedule=None, aggregate=None) -> dict:
    return {
        "enable_prefix_caching": True,
        "block_size": 128,
        "enable_chunked_prefill": True,
        "max_num_batched_tokens": 32,
        "max_num_seqs": 8,
        "num_speculative_tokens": 3 if schedule else None,
        "num_speculative_tokens_per_batch_size": schedule,
        "k_by_batch_size": {"1": 3, "2": 2} if schedule else None,
        "prefix_cache_hit_tokens": hits,
        "aggregate_counters": aggregate,
    }


def test_features_section_reads_the_engine_not_the_options():
    opts = _opts(prefix_caching=True, in_flight=2)
    base = RunResult([[1], [2]], engine_config=_config([0, 128]))
    drafted = RunResult([[1], [2]], engine_config=_config([128, 256], [[1, 1, 3], [2, 8, 2]]))
    section = production.features_section(opts, base, [("d", drafted)], [20, 300])
    assert section["requested"]["enable_prefix_caching"] is True and section["requested"]["max_num_seqs"] == 2
    assert section["one_batch"] is True
    t, d = section["runs"]
    assert (t["run"], t["prefix_cache_hit_tokens"], t["prompts_hitting_cache"], t["prompts_split"]) == (
        "target alone",
        128,
        1,
        1,
    )
    assert d["prefix_cache_hit_tokens"] == 384 and d["k_by_batch_size"] == {"1": 3, "2": 2}
    assert d["num_speculative_tokens_per_batch_size"] == [[1, 1, 3], [2, 8, 2]]
    # the reference engine says nothing of its config: no section
    assert production.features_section(opts, RunResult([[1]]), [], [3]) is None


def test_one_batch_counters_are_held_to_the_engine_aggregate():
    per = [SpecCounters(2, 5, 3, (2, 1)), SpecCounters(1, 3, 0, (0, 0))]
    agg = SpecCounters(3, 8, 3, (2, 1)).to_dict()
    run = RunResult(
        [[1], [2]], {"a": per[0], "b": per[1]}, prompt_counters=per, engine_config=_config([0, 0], None, agg)
    )
    assert production.aggregate_findings(run) == []
    run.engine_config["aggregate_counters"] = SpecCounters(4, 8, 3, (2, 1)).to_dict()
    (f,) = production.aggregate_findings(run)
    assert f.code == "E-VERIFY-COUNTERS" and "(3, 8, 3, (2, 1))" in f.message and "(4, 8, 3, (2, 1))" in f.message


def _row(pid: str, position: int, classification: str, batch_variant: bool | None = None) -> dict:
    forensics = {"id": pid, "position": position, "classification": classification}
    if batch_variant is not None:
        forensics["batch_variant"] = batch_variant
    return {"id": pid, "match": False, "first_divergence": position, "forensics": forensics}


def test_a_near_tie_the_target_alone_flips_under_batching_is_engine_numerics():
    ok = {"id": "c", "match": True, "first_divergence": None, "forensics": None}
    found = _lossless_findings([_row("a", 5, "near_tie", True), _row("b", 7, "near_tie", False), ok])
    assert [f.code for f in found] == ["W-VERIFY-BATCH-NUMERICS", "W-VERIFY-NEAR-TIE"]
    assert "1 of 3 prompts" in found[0].message and "a@5" in found[0].message and "b@7" in found[1].message
    # a fault stays an error, whatever else diverged
    found = _lossless_findings([_row("a", 5, "near_tie", True), _row("b", 7, "fault"), ok])
    assert [f.code for f in found] == ["E-VERIFY-LOSSLESS"] and "b@7" in found[0].message


def test_numerics_rerun_runs_once_and_marks_only_flips_at_or_before_the_divergence():
    baseline = RunResult([[1, 2, 3, 4], [5, 6, 7, 8], [9, 9, 9]])
    plain = RunResult([[1, 2, 0, 4], [5, 6, 7, 0], [9, 9, 9]])  # the target alone changes p0@2, p1@3
    calls = []

    def explain(rows, run):
        return {
            r["id"]: {"id": r["id"], "position": r["first_divergence"], "classification": "near_tie"} for r in rows
        }, None

    def rerun():
        calls.append(1)
        return [plain]

    wrapped, record = production.numerics_explainer(explain, baseline, rerun, {"p0": 0, "p1": 1, "p2": 2})
    found, _ = wrapped([{"id": "p0", "first_divergence": 2}, {"id": "p1", "first_divergence": 1}], None)
    assert found["p0"]["batch_variant"] is True  # the target alone flips the same token
    assert found["p1"]["batch_variant"] is False  # it flips later than the drafter run diverged
    wrapped([{"id": "p2", "first_divergence": 0}], None)
    assert calls == [1] and record == {
        "ran": True,
        "prompts_changed": [{"id": "p0", "first_divergence": 2}, {"id": "p1", "first_divergence": 3}],
    }
    spec = production.plain_spec(RunSpec(Path("t"), None, engine_options={"max_num_seqs": 8}, one_batch=True), _opts())
    assert spec.engine_options == {"max_num_seqs": 1} and not spec.one_batch


def test_text_view_shows_the_features_read_back():
    from rich.console import Console

    from eaglehub.views.verify import features_lines

    base = RunResult([[1], [2]], engine_config=_config([0, 128]))
    drafted = RunResult([[1], [2]], engine_config=_config([128, 256], [[1, 1, 3], [2, 8, 2]]))
    section = production.features_section(_opts(in_flight=2), base, [("d", drafted)], [20, 300])
    section["numerics_check"] = {"ran": True, "prompts_changed": [{"id": "p1", "first_divergence": 4}]}
    text = "\n".join(features_lines(section, 2))
    assert text.startswith("vLLM features (from the engine's config): prefix caching on (block 128 tokens; 384")
    assert "chunked prefill on (1 of 2 prompts split)" in text and "max_num_seqs 8" in text
    assert "k schedule [[1, 1, 3], [2, 8, 2]]; every prompt in one batch" in text
    assert "prompts it changes: p1@4" in text
    Console(record=True).print(text)
    assert json.dumps(section)  # JSON-ready


class _Batched:
    """A stand-in for the vLLM engine: the target alone flips prompt 0's token 2 when run without the features
    (one request at a time), the drafter run flips it too; the engine reports its config as vLLM's worker does."""

    name = "vllm"
    kv_cache_bytes = 0

    def __init__(self):
        self.specs: list[RunSpec] = []

    def version(self) -> str:
        return "0.32.0"

    def profile(self) -> str:
        return "vllm-0.32-cpu"

    def run(self, spec, ids, groups, progress=None):
        self.specs.append(spec)
        outputs = [[10, 11, 12, 13] for _ in ids]
        if spec.drafter or not spec.one_batch:
            outputs[0] = [10, 11, 99, 13]
        per = [SpecCounters(2, 6, 2, (1, 1, 0), (0, 2, 0, 0)) for _ in ids] if spec.drafter else None
        counters = {}
        for g, c in zip(groups, per or []):
            counters[g] = counters[g] + c if g in counters else c
        config = _config([0] * len(ids), [[1, 8, 3]] if spec.drafter else None)
        config["max_num_seqs"] = spec.engine_options.get("max_num_seqs", 256)
        total = sum(per, SpecCounters()) if per else None
        config["aggregate_counters"] = total.to_dict() if total else None
        return RunResult(outputs, counters, 1.0, 1.0, "vllm", "0.32.0", per, engine_config=config)


class _TiedTarget:
    """Forensics' target: tokens 12 and 99 are its top-2, 0.001 apart (a near-tie)."""

    def new_cache(self):
        return None

    def forward(self, ids, cache, extra):
        import torch

        logits = torch.zeros(len(ids), 128)
        logits[-1, 12], logits[-1, 99] = 20.0, 19.999
        return logits, None


def test_run_verify_classifies_a_batch_flipped_near_tie(monkeypatch):
    from eaglehub.verify import run as verify

    monkeypatch.setattr(verify, "preflight", lambda d, t, profiles=None: None)
    monkeypatch.setattr(verify, "_target_loader", lambda engines, target, opts: lambda: _TiedTarget())
    engine = _Batched()
    opts = _opts(k=3, max_tokens=4, categories=["coding"], limit=2, in_flight=2, k_schedule=[[1, 8, 3]])
    report = verify.run_verify(opts, engines=[engine])  # validated against the schema inside
    d = report["drafters"][0]
    assert [f["code"] for f in d["findings"] if f["code"] != "W-VERIFY-LOW-AL"] == ["W-VERIFY-BATCH-NUMERICS"]
    assert d["passed"] and not d["lossless"]
    forensics = d["prompts"][0]["forensics"]
    assert (forensics["classification"], forensics["batch_variant"], forensics["position"]) == ("near_tie", True, 2)
    section = report["settings"]["production_features"]
    assert section["numerics_check"] == {"ran": True, "prompts_changed": [{"id": "code-01", "first_divergence": 2}]}
    # the featured runs, then the one rerun: the target alone, one request at a time, one batch per category
    featured, drafted, plain = engine.specs
    assert featured.one_batch and featured.engine_options["max_num_seqs"] == 2 and drafted.drafter is not None
    assert plain.drafter is None and not plain.one_batch and plain.engine_options == {"max_num_seqs": 1}
    assert featured.engine_options["num_speculative_tokens_per_batch_size"] == [[1, 8, 3]]
