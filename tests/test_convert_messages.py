"""Messages of ``convert`` and of the findings whose fix is a conversion name the right cause, and every command
they propose runs as printed (issue #37, item 3): a ``--set`` that breaks the config is the edit's fault, not the
source's; an edit never changes the layout the source is detected as; a key no engine reads is said by name."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

from click.testing import CliRunner
from helpers.paths import ROOT

from eaglehub.cli import main
from eaglehub.convert.run import convert
from eaglehub.formats.registry import read_drafter

PRODUCERS = ROOT / "fixtures" / "producers"
SPECFORGE = PRODUCERS / "specforge" / "eagle3-sglang"
AUX = "eagle_aux_hidden_state_layer_ids"


def _run(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_a_set_that_breaks_the_config_is_blamed_on_the_edit_by_name(tmp_path):
    """The source validates; ``--set hidden_size=7`` makes E-CONFIG-DIM. The refusal names the edit (and only the
    edit that makes the error, not another one given with it), exits 2 like any bad option, writes nothing."""
    res = _run("convert", SPECFORGE, tmp_path / "out", "--set", "hidden_size=7", "--set", "norm_output=false")
    text = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert "error: --set hidden_size=7 makes the config invalid: E-CONFIG-DIM hidden_size: hidden_size is 7" in text
    assert "tensors imply 64" in text
    assert "hint: drop --set hidden_size=7 or give it a value the tensors agree with" in text
    assert "the source as stored has no error finding" in text
    assert "norm_output" not in text and "refusing to convert" not in text and "validate" not in text
    assert not (tmp_path / "out").exists()
    # an edit that gives the value the tensors imply converts
    assert (
        _run("convert", SPECFORGE, tmp_path / "ok", "--set", "hidden_size=64", "--set", "norm_output=false").exit_code
        == 0
    )


def test_a_key_no_engine_reads_is_warned_by_name_and_a_key_read_as_it_was_is_not_called_unread(tmp_path):
    report = convert(SPECFORGE, tmp_path / "foo", settings={"foo": "bar"})
    warned = [w for w in report["warnings"] if w.startswith("--set foo:")]
    assert len(warned) == 1 and "no engine profile checked" in warned[0] and "reads foo" in warned[0]
    res = _run("convert", SPECFORGE, tmp_path / "foo2", "--set", "foo=bar", "--json")
    assert res.exit_code == 0 and any(w.startswith("--set foo:") for w in json.loads(res.stdout)["warnings"])
    # C-in [1, 3, 4] at the top level: the V1 runner read the nested [1, 3, 4] as C-in already, so it builds the
    # same drafter, but it does read the key (another value changes it): it is not said to ignore it
    report = convert(SPECFORGE, tmp_path / "aux", settings={AUX: [1, 3, 4]})
    v1 = next(e for e in report["profiles"]["readings"] if e["profile"] == "vllm-0.33-v1")
    assert v1["changes"] == [] and v1["unread_settings"] == []
    assert not [w for w in report["warnings"] if w.startswith("--set")]


def test_set_of_aux_ids_keeps_the_source_layout_in_the_report_the_provenance_and_the_output(tmp_path):
    """``--set`` of top-level aux ids on a SpecForge checkpoint (nested ids only) once read the edited config as
    the vLLM layout: the report and eaglehub.json called the source ``vllm`` and the output was written as vllm.
    The source is detected as stored; the output keeps its layout unless --format asks for another."""
    out = tmp_path / "out"
    report = convert(SPECFORGE, out, settings={AUX: [2, 4, 5]})
    assert (report["source_format"], report["format"]) == ("specforge", "specforge")
    prov = json.loads((out / "eaglehub.json").read_text())
    assert prov["producer"] == "specforge"
    assert prov["source"]["format"] == "specforge" and prov["conversion"]["format"] == "specforge"
    assert read_drafter(out).format == "specforge"
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["eagle_config"][AUX] == [1, 3, 4]  # SpecForge's nested C-out list, what SGLang reads
    res = _run("convert", SPECFORGE, tmp_path / "text", "--set", f"{AUX}=[2,4,5]")
    assert res.exit_code == 0 and "(specforge) →" in res.output and "(vllm" not in res.output, res.output
    # --format still chooses another layout
    assert convert(SPECFORGE, tmp_path / "v", fmt="vllm", settings={AUX: [2, 4, 5]})["format"] == "vllm"
    # a copy without eaglehub.json: the stored config decides, not the edited one
    plain = tmp_path / "plain"
    shutil.copytree(SPECFORGE, plain)
    assert read_drafter(Path(plain), settings={AUX: [2, 4, 5]}).format == "specforge"


def _hint_command(f: dict) -> list[str]:
    """The command a hint ends with (``...: eaglehub convert SRC DST ...``), as argv after ``eaglehub``."""
    import shlex

    argv = shlex.split(f["hint"].rsplit(": eaglehub ", 1)[1])
    return argv


def _full_vocab(bad_t2d: bool = True, d2t_shift: int = 0):
    import torch

    def mutate(cfg, t):
        V = cfg["vocab_size"]
        cfg["draft_vocab_size"] = V
        t["lm_head.weight"] = (torch.randn(V, cfg["hidden_size"]) * 0.05).to(torch.bfloat16)
        ids = torch.roll(torch.arange(V), d2t_shift)
        t["d2t"] = ids - torch.arange(V)
        t2d = torch.ones(V, dtype=torch.bool)
        if bad_t2d:
            t2d[5] = False
        t["t2d"] = t2d

    return mutate


def test_the_conversion_a_full_vocabulary_hint_proposes_runs_as_printed_and_validates(make_drafter, tmp_path):
    """A full-vocabulary drafter (Vd == V) shipping an identity d2t and a t2d missing one id: vLLM refuses the d2t
    (E-ENGINE-WEIGHT, whose hint is the vllm layout without the maps) and the t2d is inconsistent (E-T2D-COUNT,
    E-T2D-MISMATCH). convert once refused the very conversion the hint printed; each hint's command now runs as
    printed and its output validates with no error."""
    from eaglehub.checks.validate import validate

    src = make_drafter("full", mutate=_full_vocab())
    report = validate(src)
    codes = sorted(f["code"] for f in report["findings"] if f["severity"] == "error")
    assert codes == ["E-ENGINE-WEIGHT", "E-T2D-COUNT", "E-T2D-MISMATCH"], report["findings"]
    for f in report["findings"]:
        argv = _hint_command(f)
        assert argv[0] == "convert" and argv[1] == str(src), f["hint"]
        if Path(argv[2]).exists():
            shutil.rmtree(argv[2])
        res = _run(*argv)
        assert res.exit_code == 0, (f["code"], res.output)
        after = validate(Path(argv[2]))
        assert [g for g in after["findings"] if g["severity"] == "error"] == [], (f["code"], after["findings"])
        assert read_drafter(Path(argv[2])).names.keys().isdisjoint({"d2t", "t2d"})  # the vllm layout: no maps


def test_rebuild_vocab_maps_writes_both_maps_from_the_one_the_checkpoint_holds(make_drafter, tmp_path):
    import numpy as np
    import torch
    from helpers.checkpoints import vocab_maps

    from eaglehub.checks.validate import validate
    from eaglehub.errors import EaglehubError
    from eaglehub.io.tensorio import read_index

    used = list(range(3, 3 + 64, 2))[:32]
    d2t, t2d = vocab_maps(used, 256)

    def bad_t2d(cfg, t):
        t["d2t"], t["t2d"] = d2t.clone(), t2d.clone()
        t["t2d"][used[0]] = False
        t["t2d"][0] = True  # the same count, another id: only the mismatch tells

    src = make_drafter("bad-t2d", mutate=bad_t2d)
    found = [f for f in validate(src)["findings"] if f["code"] == "E-T2D-MISMATCH"]
    assert len(found) == 1 and "from d2t (the map the engines serve with)" in found[0]["hint"]
    argv = _hint_command(found[0])
    assert argv[-1] == "--rebuild-vocab-maps"
    res = _run(*argv, "--json")
    assert res.exit_code == 0, res.output
    out = Path(argv[2])
    tensors = read_index(out).load_all()
    assert torch.equal(tensors["d2t"], d2t) and torch.equal(tensors["t2d"], t2d)
    assert any(
        w.startswith("--rebuild-vocab-maps: wrote d2t and t2d from d2t") for w in json.loads(res.stdout)["warnings"]
    )
    assert [f for f in validate(out)["findings"] if f["severity"] == "error"] == []

    def dup_d2t(cfg, t):  # d2t names a target id twice; t2d holds the 32 sorted ids
        t["d2t"], t["t2d"] = d2t.clone(), t2d.clone()
        t["d2t"][1] = t["d2t"][0] - 1

    src = make_drafter("dup", mutate=dup_d2t)
    found = [f for f in validate(src)["findings"] if f["code"] == "E-D2T-DUPLICATE"]
    assert len(found) == 1 and "t2d's 32 target ids in ascending order" in found[0]["hint"]
    res = _run(*_hint_command(found[0]))
    assert res.exit_code == 0, res.output
    fixed = read_index(Path(_hint_command(found[0])[2])).load_all()
    assert np.array_equal(fixed["d2t"].numpy(), d2t.numpy())

    def no_maps(cfg, t):
        del t["d2t"], t["t2d"]

    src = make_drafter("none", mutate=no_maps)
    with __import__("pytest").raises(EaglehubError, match="cannot be rebuilt: there is no d2t") as exc:
        convert(src, tmp_path / "none-out", rebuild_vocab_maps=True)
    assert exc.value.exit_code == 1 and not (tmp_path / "none-out").exists()
    res = _run("convert", src, tmp_path / "cal", "--rebuild-vocab-maps", "--to", "3.1", "--calibrate", "--target", "x")
    assert res.exit_code == 2 and "--rebuild-vocab-maps is a plain conversion" in res.output


def test_a_full_vocabulary_d2t_that_is_not_the_identity_is_never_left_out_silently(make_drafter, tmp_path):
    """Leaving out a d2t that moves rows would score every draft row as another token: refused, naming why."""
    from eaglehub.checks.validate import validate
    from eaglehub.errors import EaglehubError

    src = make_drafter("rolled", mutate=_full_vocab(bad_t2d=False, d2t_shift=1))
    hint = next(f["hint"] for f in validate(src)["findings"] if f["code"] == "E-ENGINE-WEIGHT")
    assert "not the identity" in hint and "eaglehub convert" not in hint
    for kw in ({"fmt": "vllm"}, {"fmt": "vllm", "rebuild_vocab_maps": True}):
        with __import__("pytest").raises(
            EaglehubError, match="d2t is not the identity although the vocabulary is full"
        ):
            convert(src, tmp_path / "out", **kw)
        assert not (tmp_path / "out").exists()


# -- findings whose hint is the exact command that fixes them ---------------------------------------------------


def _validate(path: Path, target: Path | None = None, profiles: tuple[str, ...] | None = None) -> dict:
    from eaglehub.checks.context import Options
    from eaglehub.checks.validate import validate

    return validate(path, target, options=Options(profiles=profiles) if profiles else None)


def _fixed_by_its_hint(f: dict) -> Path:
    """Run the command the finding's hint ends with, exactly as printed; the copy it wrote."""
    argv = _hint_command(f)
    assert argv[0] == "convert" and argv[2].endswith("-fixed"), f["hint"]
    if Path(argv[2]).exists():  # a copy a former hint of the same source wrote
        shutil.rmtree(argv[2])
    res = _run(*argv)
    assert res.exit_code == 0, (f["code"], f["hint"], res.output)
    return Path(argv[2])


def _copy_with(tmp_path: Path, name: str, src: Path, **changes) -> Path:
    out = tmp_path / name
    shutil.copytree(src, out)
    cfg = json.loads((out / "config.json").read_text())
    for k, v in changes.items():
        if v is ...:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    return out


MLA_KEYS = {"q_lora_rank": 32, "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 32}


def test_an_mla_config_over_llama_attention_is_told_the_class_and_the_command_that_fixes_it(tmp_path):
    """A Llama-attention drafter (q/k/v_proj) whose config was given an MLA target's type, class and ranks: once told
    ``--set v_head_dim=16`` (o_proj's width over the heads) and to store q/k/v_proj "under midlayer.*", where they
    are. The class is named as the cause, with one exact command; every finding it causes carries that command,
    no dimension edit is proposed, and the command's output validates clean."""
    src = _copy_with(
        tmp_path,
        "kimi-llama",
        SPECFORGE,
        architectures=["Eagle3DeepseekV2ForCausalLM"],
        model_type="deepseek_v3",
        **MLA_KEYS,
    )
    report = _validate(src)
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    arch = [f for f in errors if f["code"] == "E-CONFIG-ARCH"]
    assert len(arch) == 1 and "the attention tensors are Llama's" in arch[0]["message"], report["findings"]
    assert "E-CONFIG-DIM" not in {f["code"] for f in errors} and "E-MLA-MODELTYPE" not in {f["code"] for f in errors}
    assert not any("v_head_dim" in f["hint"] or "store it under" in f["hint"] for f in report["findings"])
    assert all(f["hint"] == arch[0]["hint"] for f in errors), [(f["code"], f["hint"]) for f in errors]
    assert arch[0]["hint"].endswith(
        """--set 'architectures=["LlamaForCausalLMEagle3"]' --set model_type=llama --set kv_lora_rank=null"""
    )
    fixed = _fixed_by_its_hint(arch[0])
    assert [f for f in _validate(fixed)["findings"] if f["severity"] == "error"] == []
    # the class alone (a Kimi type, no ranks): the same cause, the same kind of command
    bare = _copy_with(
        tmp_path, "kimi-class", SPECFORGE, architectures=["Eagle3DeepseekV2ForCausalLM"], model_type="kimi_k2"
    )
    (arch,) = [f for f in _validate(bare)["findings"] if f["code"] == "E-CONFIG-ARCH"]
    assert "Llama's" in arch["message"]
    assert [f for f in _validate(_fixed_by_its_hint(arch))["findings"] if f["severity"] == "error"] == []


def test_an_unexpected_tensor_already_under_midlayer_is_not_told_to_move_there(make_drafter):
    import torch

    src = make_drafter("stray", mutate=lambda cfg, t: t.update({"midlayer.self_attn.rotary.weight": torch.ones(16)}))
    (f,) = [f for f in _validate(src)["findings"] if f["code"] == "E-TENSOR-UNEXPECTED"]
    assert f["subject"] == "midlayer.self_attn.rotary.weight"
    assert "store it under" not in f["hint"] and "already the layout's" in f["hint"]


def _hint_clears(f: dict, code: str, target: Path | None = None, profiles=None) -> None:
    fixed = _fixed_by_its_hint(f)
    after = [g for g in _validate(fixed, target, profiles)["findings"] if g["code"] == code]
    assert after == [], (f["hint"], after)


def test_aux_count_hints_are_commands_that_clear_the_finding(make_drafter, make_target):
    """Four ids for an fc sized for three: with the target known, its default layers; without, the first three."""
    src = make_drafter("four", mutate=lambda cfg, t: cfg.update(eagle_aux_hidden_state_layer_ids=[2, 4, 5, 6]))
    target = make_target(8)
    (f,) = [f for f in _validate(src, target)["findings"] if f["code"] == "E-AUX-COUNT"]
    assert f["hint"].endswith("--set 'eagle_aux_hidden_state_layer_ids=[2,4,5]'") and "default layers" in f["hint"]
    _hint_clears(f, "E-AUX-COUNT", target)
    (f,) = [f for f in _validate(src)["findings"] if f["code"] == "E-AUX-COUNT"]
    assert "the first 3" in f["hint"]
    _hint_clears(f, "E-AUX-COUNT")


def test_aux_convention_hints_are_commands_that_clear_the_finding(make_drafter, tmp_path):
    # top-level ids starting at 1: C-out ids under the C-in key
    src = make_drafter("one", mutate=lambda cfg, t: cfg.update(eagle_aux_hidden_state_layer_ids=[1, 3, 4]))
    (f,) = [f for f in _validate(src)["findings"] if f["code"] == "W-AUX-CONVENTION"]
    assert f["hint"].endswith("--set 'eagle_aux_hidden_state_layer_ids=[2,4,5]'")
    _hint_clears(f, "W-AUX-CONVENTION")
    # SpecForge's nested C-out list, which vLLM's V1 runner captures as written (one layer early)
    v1 = ("vllm-0.33-v1",)
    (f,) = [f for f in _validate(SPECFORGE, profiles=v1)["findings"] if f["code"] == "W-AUX-CONVENTION"]
    copy = tmp_path / "sf"
    shutil.copytree(SPECFORGE, copy)
    (f,) = [f for f in _validate(copy, profiles=v1)["findings"] if f["code"] == "W-AUX-CONVENTION"]
    _hint_clears(f, "W-AUX-CONVENTION", profiles=v1)

    # nested ids no rule reads (vllm layout: no producer convention to fall back on)
    def nested(cfg, t):
        cfg.pop("eagle_aux_hidden_state_layer_ids")
        cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": [3, 4, 6]}

    src = make_drafter("nested", mutate=nested)
    found = [f for f in _validate(src)["findings"] if f["code"] == "W-AUX-CONVENTION"]
    assert len(found) == 1 and "cannot tell" in found[0]["message"], _validate(src)["findings"]
    _hint_clears(found[0], "W-AUX-CONVENTION")


def test_config_schema_and_mla_model_type_hints_are_commands_that_clear_the_finding(tmp_path):
    for name, changes in {
        "text-width": {"hidden_size": "64"},
        "no-width": {"hidden_size": ...},
        "text-bool": {"tie_word_embeddings": "false"},
        "no-layers": {"num_hidden_layers": 0},
    }.items():
        src = _copy_with(tmp_path, name, SPECFORGE, **changes)
        schema = [f for f in _validate(src)["findings"] if f["code"] == "E-CONFIG-SCHEMA"]
        assert len(schema) == 1 and ": eaglehub convert " in schema[0]["hint"], (name, schema)
        _hint_clears(schema[0], "E-CONFIG-SCHEMA")
    mla = tmp_path / "mla"
    shutil.copytree(PRODUCERS / "torchspec" / "mla-eagle3", mla)
    (f,) = [f for f in _validate(mla)["findings"] if f["code"] == "E-MLA-MODELTYPE"]
    assert f["hint"].endswith("--set model_type=deepseek_v2")
    _hint_clears(f, "E-MLA-MODELTYPE")


def test_missing_fc_norm_gains_are_one_finding_listing_them():
    found = [
        f
        for f in _validate(PRODUCERS / "speculators" / "convert-eagle3.1-flags")["findings"]
        if f["code"] == "E-FCNORM-MISSING"
    ]
    assert len(found) == 1, found
    assert (
        all(f"fc_norm.{i}.weight [64]" in found[0]["message"] for i in range(3))
        and " are missing" in found[0]["message"]
    )


def test_an_empty_source_path_is_refused_not_read_as_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for args in (["validate", ""], ["inspect", ""], ["convert", "", str(tmp_path / "out"), "--to", "3.1"]):
        res = _run(*args)
        assert res.exit_code == 2 and "an empty path names no drafter" in res.output, (args, res.output)


def test_the_dtype_warning_says_what_each_engine_does(make_drafter, make_target):
    src, target = make_drafter(), make_target(8, torch_dtype="float16")
    found = {
        f["profiles"][0]: f
        for f in _validate(src, target, ("vllm-0.33-gpu", "sglang-0.5.23"))["findings"]
        if f["code"] == "W-DTYPE-MISMATCH"
    }
    assert set(found) == {"vllm-0.33-gpu", "sglang-0.5.23"}
    assert "vLLM builds the drafter in the target's float16" in found["vllm-0.33-gpu"]["message"]
    sglang = found["sglang-0.5.23"]
    assert "SGLang runs the drafter in its own bfloat16" in sglang["message"] and "vLLM" not in sglang["hint"]
    assert "--dtype float16" in sglang["hint"]


def test_an_undeclared_target_width_hint_is_a_command_that_clears_it(make_drafter):
    import torch

    def narrow(cfg, t):  # fc reads 3 states of width 32, and the config leaves target_hidden_size out
        cfg.pop("target_hidden_size")
        t["fc.weight"] = torch.zeros(64, 96, dtype=torch.bfloat16) + 0.01
        t["embed_tokens.weight"] = torch.zeros(256, 64, dtype=torch.bfloat16) + 0.01  # Ht != H: its own table

    (f,) = [
        f for f in _validate(make_drafter("narrow", mutate=narrow))["findings"] if f["code"] == "E-HIDDEN-UNDECLARED"
    ]
    assert f["hint"].endswith("--set target_hidden_size=32")
    _hint_clears(f, "E-HIDDEN-UNDECLARED")


def test_set_of_an_upgrade_switch_with_to_31_is_refused_with_the_upgrades_own_flag(tmp_path):
    """``--to 3.1 --set norm_output=false`` once wrote norm_output true (the upgrade's default overrode the edit),
    and ``--set norm_output=true`` blamed the source ("already an EAGLE-3.1 drafter")."""
    for value, flag in (("false", "--no-norm-output"), ("true", "--norm-output")):
        out = tmp_path / value
        res = _run("convert", SPECFORGE, out, "--to", "3.1", "--set", f"norm_output={value}")
        text = " ".join(res.output.split())
        assert res.exit_code == 2 and "--set norm_output with --to 3.1" in text, text
        assert "is already an EAGLE-3.1 drafter" not in text
        assert not out.exists()
        argv = _hint_command({"hint": text.split("hint: ", 1)[1]})
        assert argv[-1] == flag
        assert _run(*argv).exit_code == 0
        assert json.loads((out / "config.json").read_text())["norm_output"] is (value == "true")


def test_a_pruned_drafter_without_d2t_is_told_the_rebuild_from_its_t2d(make_drafter):
    """vLLM sends draft id i to target id i without d2t; the t2d the drafter ships names the trained ids."""
    from eaglehub.io.tensorio import read_index

    src = make_drafter("no-d2t", mutate=lambda cfg, t: t.pop("d2t"))
    expected = read_index(make_drafter("with-d2t")).load_all()["d2t"]
    (f,) = [f for f in _validate(src)["findings"] if f["code"] == "E-D2T-MISSING"]
    assert "from t2d's 32 target ids in ascending order" in f["hint"] and f["hint"].endswith("--rebuild-vocab-maps")
    fixed = _fixed_by_its_hint(f)
    assert [g for g in _validate(fixed)["findings"] if g["severity"] == "error"] == []
    assert read_index(fixed).load_all()["d2t"].tolist() == expected.tolist()


def test_an_ignored_aux_list_names_the_trained_layers_the_fix_writes():
    """A SpecForge drafter judged for Model Runner V2 without a target: the warning's trained layers are the ids its
    fix writes (vLLM's numbering, SGLang's ids + 1), so the two numbers a reader sees agree."""
    from eaglehub.checks.validate import validate

    report = validate(ROOT / "fixtures/producers/specforge/eagle3-sglang")
    (f,) = [f for f in report["findings"] if f["code"] == "W-AUX-IGNORED"]
    written = f["hint"].split("eagle_aux_hidden_state_layer_ids=")[1].strip("'")
    assert f"(C-in {json.loads(written)}," in f["message"], (f, written)


def test_a_set_that_makes_an_engine_fail_is_refused_and_the_aux_count_hint_runs(tmp_path, monkeypatch):
    """fc reads 3 aux states; ``--set`` of a 2-id list makes every engine fail on fc's shape (E-AUX-COUNT): the
    edit is refused by name, nothing is written. A checkpoint written that way before (the refusal switched off:
    what convert wrote until now) gets an E-AUX-COUNT hint that, pasted as printed, converts to a drafter that
    validates without E-AUX-COUNT; the old advice (set the count) is refused with a true word on the source."""
    res = _run("convert", SPECFORGE, tmp_path / "out", "--set", f"{AUX}=[1,3]")
    text = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert f"error: --set '{AUX}=[1,3]' makes the output fail validation: E-AUX-COUNT fc.weight:" in text
    assert "the source as stored has no such error (nothing was written)" in text
    assert not (tmp_path / "out").exists()

    import eaglehub.convert.run as run

    monkeypatch.setattr(run, "refuse_edit_engine_errors", lambda *a, **k: None)
    broken = tmp_path / "broken"
    assert _run("convert", SPECFORGE, broken, "--set", f"{AUX}=[1,3]").exit_code == 0
    monkeypatch.undo()
    report = json.loads(_run("validate", broken, "--json").stdout)
    (f,) = [f for f in report["findings"] if f["code"] == "E-AUX-COUNT"]
    command = f["hint"][f["hint"].index("eaglehub convert ") :]
    assert f"--set '{AUX}=[2,4,5]'" in command  # the nested [1, 3, 4] the edit replaced, written C-in
    fixed = _run(*shlex.split(command)[1:])
    assert fixed.exit_code == 0, fixed.output
    after = json.loads(_run("validate", shlex.split(command)[3], "--json").stdout)
    assert after["ok"] and not [x for x in after["findings"] if x["code"] == "E-AUX-COUNT"]
    res = _run("convert", broken, tmp_path / "count", "--set", "num_aux_hidden_states=3")
    text = " ".join(res.output.split())
    assert res.exit_code == 2 and "the source as stored has no error finding" not in text
    assert "the source as stored fails too (E-AUX-COUNT)" in text
