"""The vLLM version rules (eaglehub/checks/engine.py) judged per engine profile: each vLLM profile's release is
the version a drafter is served with; SGLang profiles are not vLLM's to judge; an explicit --vllm-version alone
is compared as given."""

from __future__ import annotations

from eaglehub.checks.validate import Options, validate


def _version_findings(report: dict) -> list[dict]:
    return [f for f in report["findings"] if f["code"] in ("E-ENGINE-VERSION", "W-ENGINE-VERSION")]


def test_each_vllm_profile_is_judged_at_its_release(make_drafter):
    """EAGLE-3.1 flags are read from vLLM 0.22.0: a 3.1 drafter judged for 0.21 and 0.33 is an error on 0.21 only."""
    d = make_drafter(v31=True)
    report = validate(d, options=Options(profiles=("vllm-0.33-gpu", "vllm-0.21", "sglang-0.5.23")))
    (f,) = _version_findings(report)
    assert (f["code"], f["subject"], f["profiles"]) == ("E-ENGINE-VERSION", "fc_norm", ["vllm-0.21-v1"])
    assert f["message"].startswith("vLLM 0.21.0 on GPU with the V1 runner") and "PR #42764" in f["message"]
    assert "not on vLLM 0.33.0 on GPU (Model Runner V2); SGLang 0.5.23" in f["message"]
    assert f["hint"] == "serve with vLLM >= 0.22.0"


def test_an_unresolved_version_is_the_default_profiles_release(make_drafter):
    """Without --vllm-version or --profile the default profile's release is the version judged (no warning
    that no version is known): what quantize and publish judge their outputs with."""
    d = make_drafter(v31=True)
    assert _version_findings(validate(d, options=Options())) == []
    assert _version_findings(validate(d, options=Options(profiles=("sglang-0.5.23",)))) == []
    given = _version_findings(validate(make_drafter("d2", v31=True), options=Options(vllm_version="0.21.0")))
    assert [(f["code"], f.get("profiles")) for f in given] == [("E-ENGINE-VERSION", None)]
