"""``validate --deep`` judges float tensors by what the engine does with them (eaglehub/checks/zeros.py): an
all-zero norm gain, projection or embedding the engine keeps is E-TENSOR-ZERO, FP8 blocks that dequantize to
zeros are E-QUANT-ZERO-BLOCK; the gates that read tensors (publish, pipeline) refuse on them."""

from __future__ import annotations

import json
import shlex

import pytest
import torch
from click.testing import CliRunner
from test_publish import publish, verified  # noqa: F401  (the fixture is used by name)
from test_quant_findings import fp8

from eaglehub.checks.validate import Options, validate
from eaglehub.cli import main


def zeroed(*names):
    def mutate(cfg, t):
        for n in names:
            t[n] = torch.zeros_like(t[n])

    return mutate


def with_embedding(cfg, t):
    t["embed_tokens.weight"] = torch.zeros(cfg["vocab_size"], cfg["hidden_size"], dtype=torch.bfloat16)


def errors(report: dict, code: str) -> dict[str, dict]:
    return {f["subject"]: f for f in report["findings"] if f["code"] == code}


@pytest.mark.parametrize(
    "name, effect",
    [
        ("norm.weight", "accepts (almost) nothing"),
        ("midlayer.input_layernorm.weight", "never sees the token it continues from"),
        ("midlayer.hidden_norm.weight", "never sees the target's hidden states"),
        ("midlayer.post_attention_layernorm.weight", "MLP adds nothing"),
        ("lm_head.weight", "accepts (almost) nothing"),
        ("fc.weight", "none of the target's hidden states"),
        ("midlayer.self_attn.o_proj.weight", "attention outputs zeros"),
    ],
)
def test_an_all_zero_gain_or_matrix_fails_deep_validation(make_drafter, name, effect):
    path = make_drafter(mutate=zeroed(name))
    report = validate(path, deep=True)
    found = errors(report, "E-TENSOR-ZERO")
    assert list(found) == [name] and not report["ok"], report["findings"]
    f = found[name]
    assert f["severity"] == "error" and "is all zeros" in f["message"] and effect in f["message"]
    assert f["profiles"] == ["vllm-0.33-gpu"]
    assert "W-TENSOR-INIT" not in {x["code"] for x in report["findings"]}  # one defect, one finding
    assert errors(validate(path), "E-TENSOR-ZERO") == {}  # values are read with --deep only


def test_a_zero_fc_norm_gain_counts_only_where_fc_norm_is_on(make_drafter):
    path = make_drafter(v31=True, mutate=zeroed("fc_norm.1.weight"))
    (f,) = errors(validate(path, deep=True), "E-TENSOR-ZERO").values()
    assert f["subject"] == "fc_norm.1.weight" and "aux state 1 is zeroed before fc" in f["message"]


def test_a_zero_embedding_fails_where_the_engine_keeps_the_drafters_table(make_drafter):
    """vLLM keeps a drafter's own table that differs from the target's; SGLang puts the target's in its place."""
    path = make_drafter(mutate=with_embedding)
    report = validate(path, deep=True, options=Options(profiles=("vllm-0.33-gpu", "sglang-0.5.23")))
    (f,) = errors(report, "E-TENSOR-ZERO").values()
    assert f["subject"] == "embed_tokens.weight" and f["profiles"] == ["vllm-0.33-gpu"]
    assert "never sees the token it continues from" in f["message"] and "not on SGLang 0.5.23" in f["message"]
    assert errors(validate(path, deep=True, options=Options(profiles=("sglang-0.5.23",))), "E-TENSOR-ZERO") == {}


def test_cli_validate_deep_exits_1_on_zero_gains(make_drafter):
    path = make_drafter(mutate=zeroed("norm.weight", "midlayer.input_layernorm.weight"))
    res = CliRunner().invoke(main, ["validate", str(path), "--deep", "--json"])
    assert res.exit_code == 1, res.output
    assert set(errors(json.loads(res.stdout), "E-TENSOR-ZERO")) == {"norm.weight", "midlayer.input_layernorm.weight"}


def _fp8_block(cfg, t):
    fp8(strategy="block", block=(16, 16))(cfg, t)


def test_fp8_blocks_are_judged_on_their_stored_values(make_drafter):
    """q_proj [64, 128] in 16x16 blocks: one block's FP8 values zeroed (its scale untouched) is a dead block;
    every value zeroed is a dead projection; a zero scale kills its block too."""

    def one_block(cfg, t):
        _fp8_block(cfg, t)
        w = t["midlayer.self_attn.q_proj.weight"].float()
        w[16:32, 32:48] = 0
        t["midlayer.self_attn.q_proj.weight"] = w.to(torch.float8_e4m3fn)

    def every_value(cfg, t):
        _fp8_block(cfg, t)
        t["midlayer.mlp.up_proj.weight"] = torch.zeros_like(t["midlayer.mlp.up_proj.weight"].float()).to(
            torch.float8_e4m3fn
        )

    def zero_scale(cfg, t):
        _fp8_block(cfg, t)
        s = t["midlayer.mlp.down_proj.weight_scale"].clone()
        s[1, 2] = 0
        t["midlayer.mlp.down_proj.weight_scale"] = s

    assert errors(validate(make_drafter("clean", mutate=_fp8_block), deep=True), "E-QUANT-ZERO-BLOCK") == {}
    (f,) = errors(validate(make_drafter("one", mutate=one_block), deep=True), "E-QUANT-ZERO-BLOCK").values()
    assert f["subject"] == "midlayer.self_attn.q_proj.weight" and f["severity"] == "error"
    assert "1 of 32 FP8 16x16 blocks dequantize to all zeros" in f["message"]
    assert "1 holds only stored FP8 values of 0" in f["message"] and "rows 16..31 x columns 32..47" in f["message"]
    (f,) = errors(validate(make_drafter("all", mutate=every_value), deep=True), "E-QUANT-ZERO-BLOCK").values()
    assert f["subject"] == "midlayer.mlp.up_proj.weight" and "every FP8 value dequantizes to 0" in f["message"]
    assert "MLP outputs zeros" in f["message"]
    report = validate(make_drafter("scale", mutate=zero_scale), deep=True)
    (f,) = errors(report, "E-QUANT-ZERO-BLOCK").values()
    assert f["subject"] == "midlayer.mlp.down_proj.weight" and "1 has a scale of 0" in f["message"]
    assert "rows 16..31 x columns 32..47" in f["message"]
    assert errors(validate(make_drafter("shallow", mutate=one_block)), "E-QUANT-ZERO-BLOCK") == {}


def test_the_publish_gate_refuses_zero_gains_and_embeddings(verified, fake_hub, hf_env, tmp_path, monkeypatch):
    """A drafter with a passing verify report (forged past the preflight) and zero gains or a zero embedding:
    publish's gate validates deep and refuses it, dry run included."""
    from helpers.scripted import BASE, GOOD, ScriptedEngine
    from safetensors.torch import load_file, save_file

    from eaglehub.verify import run as verify
    from eaglehub.verify.report import write_report

    src, target = verified
    monkeypatch.setattr(verify, "preflight", lambda d, t, profiles=None: None)
    for name, edit in (
        ("zero-norm", lambda t: t.update({"norm.weight": torch.zeros_like(t["norm.weight"])})),
        ("zero-embed", lambda t: t.update({"embed_tokens.weight": torch.zeros(256, 64, dtype=torch.bfloat16)})),
    ):
        broken = tmp_path / name
        broken.mkdir()
        for f in src.iterdir():
            (broken / f.name).write_bytes(f.read_bytes())
        tensors = load_file(broken / "model.safetensors")
        edit(tensors)
        save_file(tensors, broken / "model.safetensors")
        opts = verify.VerifyOptions(
            target=str(target), drafters=[str(broken)], k=3, max_tokens=4, prompts_file=str(tmp_path / "p.jsonl")
        )
        write_report(
            verify.run_verify(opts, engine=ScriptedEngine({name: (BASE, GOOD)})), tmp_path / f"{name}.verify.json"
        )
        res = publish(fake_hub, broken, "--dry-run")
        assert res.exit_code == 1 and "validate finds E-TENSOR-ZERO" in res.stderr, res.output
        # the hint's command, run as printed, shows the finding that refused it (the gate reads values: --deep)
        hint = res.stderr.split("hint: run `")[1].split("`")[0]
        assert hint.startswith("eaglehub validate ") and "--deep" in hint and " T " not in hint + " ", hint
        shown = CliRunner().invoke(main, shlex.split(hint)[1:] + ["--json"])
        assert shown.exit_code == 1 and "E-TENSOR-ZERO" in {f["code"] for f in json.loads(shown.stdout)["findings"]}
    assert fake_hub.posts() == []


def test_the_pipeline_stops_at_validate_on_a_zero_gain(tmp_path, make_drafter, make_target):
    make_target(n_layers=8)
    make_drafter("zero", mutate=zeroed("midlayer.post_attention_layernorm.weight"))
    (tmp_path / "pipeline.toml").write_text(
        '[targets.tiny]\nspec = "./target8"\n\n[[drafters]]\npath = "zero"\ntarget = "tiny"\n'
        'verify = { max_tokens = 4 }\npublish = { repo = "org/zero" }\n'
    )
    res = CliRunner().invoke(main, ["pipeline", str(tmp_path / "pipeline.toml"), "--work-dir", str(tmp_path / "w")])
    assert res.exit_code == 1, res.output
    res = CliRunner().invoke(
        main, ["pipeline", str(tmp_path / "pipeline.toml"), "--work-dir", str(tmp_path / "w"), "--json"]
    )
    (row,) = json.loads(res.stdout)["drafters"]
    steps = {s["name"]: s for s in row["steps"]}
    assert steps["validate"]["status"] == "failed" and "E-TENSOR-ZERO" in steps["validate"]["error"]
    assert steps["verify"]["status"] == "skipped" and steps["publish"]["status"] == "skipped"


def test_a_constant_embedding_is_never_called_trained(make_drafter, make_target):
    """A drafter table that differs from the target's only by being all zeros (or one value) was never trained:
    no I-EMBED-TRAINED ("nothing to fix") for it, a W-TENSOR-INIT naming the value instead, and --deep's
    E-TENSOR-ZERO stays."""
    target = make_target(8, weights=True)
    zero = make_drafter("z-embed", mutate=with_embedding)

    def constant(cfg, t):
        t["embed_tokens.weight"] = torch.full((cfg["vocab_size"], cfg["hidden_size"]), 0.5, dtype=torch.bfloat16)

    for path, value in ((zero, "0"), (make_drafter("c-embed", mutate=constant), "0.5")):
        report = validate(path, target)
        codes = {f["code"]: f for f in report["findings"] if f["subject"] == "embed_tokens.weight"}
        assert "I-EMBED-TRAINED" not in codes, codes
        assert f"every value of it is {value}:" in codes["W-TENSOR-INIT"]["message"]
    deep = validate(zero, target, deep=True)
    assert "embed_tokens.weight" in errors(deep, "E-TENSOR-ZERO")
    assert not [f for f in deep["findings"] if f["code"] == "I-EMBED-TRAINED"]
    trained = make_drafter(
        "trained",
        mutate=lambda cfg, t: t.__setitem__(
            "embed_tokens.weight", (torch.randn(cfg["vocab_size"], cfg["hidden_size"]) * 0.05).to(torch.bfloat16)
        ),
    )
    assert [f["code"] for f in validate(trained, target)["findings"] if f["subject"] == "embed_tokens.weight"] == [
        "I-EMBED-TRAINED"
    ]
