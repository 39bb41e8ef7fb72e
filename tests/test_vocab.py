"""Draft-vocabulary coverage (eaglehub/vocab, docs/vocab.md): the counting on hand-made token streams, the maps
read from tiny drafters, and `eaglehub vocab` / `validate --prompts` on the real SmolLM2 pair, the fixture
and a copy whose d2t was zeroed (an identity map)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from helpers.paths import FIXTURE, ROOT
from safetensors.torch import load_file, save_file

from eaglehub.cli import main
from eaglehub.formats.registry import read_drafter
from eaglehub.io.schemas import validate_json
from eaglehub.vocab.coverage import coverage, draft_token_ids, is_identity_map

MT_BENCH = ROOT / "fixtures" / "prompts" / "mt-bench-sample.jsonl"


def test_coverage_counts_every_occurrence_and_sets_it_against_the_best_vocabulary():
    outputs = [("a", [1, 1, 1, 2, 9]), ("b", [9, 9, 3])]
    got = coverage(outputs, np.array([1, 2, 3]), vd=3)
    assert got["overall"] == {
        "output_tokens": 8,
        "distinct_tokens": 4,
        "covered_tokens": 5,  # 1 ×3, 2, 3; not the three 9s
        "coverage": 5 / 8,
        "best_coverage": 7 / 8,  # {1, 9, and one of 2 / 3}
    }
    assert got["per_category"]["b"]["coverage"] == 1 / 3 and got["per_category"]["b"]["best_coverage"] == 1.0
    assert got["missing"] == [{"token_id": 9, "count": 3}]
    assert coverage(outputs, None, vd=3)["overall"]["coverage"] == 1.0  # not pruned: every id


def test_the_draft_ids_come_from_d2t_and_an_all_zero_map_is_the_identity(make_drafter):
    d = read_drafter(make_drafter())
    ids = draft_token_ids(d)
    assert ids is not None and len(ids) == d.dims.Vd and bool((np.diff(ids) > 0).all()) and not is_identity_map(d)
    zero = read_drafter(make_drafter("zero", mutate=lambda cfg, t: t.__setitem__("d2t", torch.zeros_like(t["d2t"]))))
    assert is_identity_map(zero) and list(draft_token_ids(zero)) == list(range(zero.dims.Vd))


def test_a_map_far_below_the_best_is_a_coverage_warning_with_its_figures(make_drafter):
    from eaglehub.vocab.coverage import coverage_findings

    d = read_drafter(make_drafter())
    held = draft_token_ids(d)
    outside = [t for t in range(d.dims.V) if t not in set(held.tolist())][:5]
    section = coverage([("a", [int(held[0])] * 2 + outside * 2)], held, d.dims.Vd)  # 2 of 12 held; best: all
    section["identity_map"] = False
    (f,) = coverage_findings(d, section)
    assert f.code == "W-VOCAB-COVERAGE" and f.subject == "d2t" and "16.7%" in f.message and "100.0%" in f.message
    section = coverage([("a", [int(held[0])] * 9 + outside[:1])], held, d.dims.Vd)  # 90 % of 100 %: fine
    assert coverage_findings(d, {**section, "identity_map": False}) == []


def _vocab(*args) -> dict:
    res = CliRunner().invoke(main, ["vocab", *map(str, args), "--target", "smollm2", "--max-tokens", "32", "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    validate_json(report, "vocab-report")
    return report


@pytest.mark.slow
@pytest.mark.real
def test_the_fixture_covers_the_target_output_on_the_project_prompts_and_on_mt_bench(tmp_path):
    own = _vocab(FIXTURE, "--limit", "1")
    mt = _vocab(FIXTURE, "--prompts", MT_BENCH)
    for report, n in ((own, 6), (mt, 6)):
        c = report["coverage"]
        assert c["prompts"]["count"] == n and (c["draft_vocab_size"], c["vocab_size"]) == (8192, 49152)
        o = c["overall"]
        assert o["output_tokens"] > 0 and 0.5 < o["coverage"] <= o["best_coverage"] == 1.0
        assert sum(s["output_tokens"] for s in c["per_category"].values()) == o["output_tokens"]
        assert not c["identity_map"] and report["findings"] == []
        assert all(m["token_id"] not in set(draft_token_ids(read_drafter(FIXTURE)).tolist()) for m in c["missing"])
        print(f"fixture on {c['prompts']['file']}: coverage {o['coverage']:.4f} of {o['output_tokens']} tokens")
    assert len(own["coverage"]["per_category"]) == 6

    copy = tmp_path / "identity"
    shutil.copytree(FIXTURE, copy)
    tensors = load_file(copy / "model.safetensors")
    tensors["d2t"] = torch.zeros_like(tensors["d2t"])  # the first Vd ids, t2d saying the same: a consistent,
    tensors["t2d"] = torch.arange(tensors["t2d"].numel()) < tensors["d2t"].numel()  # untrained map
    save_file(tensors, copy / "model.safetensors")
    prompts = tmp_path / "six.jsonl"
    prompts.write_text("".join(json.dumps(p) + "\n" for p in _first_per_category()))
    res = CliRunner().invoke(main, ["validate", str(copy), "--target", "smollm2", "--prompts", str(prompts), "--json"])
    report = json.loads(res.stdout)
    validate_json(report, "validate-report")
    codes = [f["code"] for f in report["findings"]]
    assert "W-VOCAB-IDENTITY" in codes and "W-D2T-ZERO" not in codes, codes
    hit = next(f for f in report["findings"] if f["code"] == "W-VOCAB-IDENTITY")
    zeroed = report["vocab_coverage"]["overall"]["coverage"]
    print(f"identity d2t: coverage {zeroed:.4f}; {hit['message']}")
    assert report["vocab_coverage"]["identity_map"] and zeroed < own["coverage"]["overall"]["coverage"]
    assert f"{zeroed:.1%}" in hit["message"]


def _first_per_category() -> list[dict]:
    seen, out = set(), []
    for line in (ROOT / "eaglehub" / "data" / "prompts" / "eval.jsonl").read_text().splitlines():
        p = json.loads(line)
        if p["category"] not in seen:
            seen.add(p["category"])
            out.append(p)
    return out


@pytest.mark.parametrize("verb", ["vocab", "probe"])
def test_a_missing_target_or_a_broken_drafter_is_one_line_before_any_engine_work(verb, make_drafter, make_target):
    res = CliRunner().invoke(main, [verb, str(make_drafter())])
    assert res.exit_code == 2 and "Missing option '--target'" in res.output and "Traceback" not in res.output
    broken = make_drafter("wrong-vd", mutate=lambda cfg, t: cfg.__setitem__("draft_vocab_size", 64))
    res = CliRunner().invoke(main, [verb, str(broken), "--target", str(make_target(8, weights=True))])
    assert res.exit_code == 1 and "fails validation" in res.output and "E-CONFIG-DIM" in res.output, res.output


def test_validate_prompts_measures_nothing_on_a_drafter_with_an_error(make_drafter, make_target):
    from eaglehub.checks.validate import validate

    broken = make_drafter(mutate=lambda cfg, t: cfg.__setitem__("draft_vocab_size", 64))
    report = validate(broken, make_target(8, weights=True), prompts="default")
    assert "vocab_coverage" not in report and "E-CONFIG-DIM" in [f["code"] for f in report["findings"]]


@pytest.mark.parametrize("verb", ["vocab", "probe"])
def test_the_preflight_judges_for_the_reference_engine_that_runs_the_drafter(verb, make_drafter, make_target):
    """Four aux ids only in eagle_config: vLLM's V1 runner reads them (so does the reference engine these verbs run),
    Model Runner V2, the default profile, never does. The preflight judges for the engine that runs: no refusal."""
    from test_profiles import _nested_only

    nested = make_drafter("nested4", mutate=_nested_only([1, 3, 4, 6]))
    target = str(make_target(8, weights=True))
    assert "E-AUX-IGNORED" in CliRunner().invoke(main, ["validate", str(nested), "--target", target]).output
    res = CliRunner().invoke(main, [verb, str(nested), "--target", target, "--limit", "1", "--json"])
    # past the preflight, the next step needs the target's tokenizer, which this tiny target has none of
    assert "fails validation" not in res.output and "cannot load the tokenizer" in res.output, res.output
