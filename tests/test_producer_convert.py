"""``eaglehub convert`` on the checkpoints the real producers write (fixtures/producers/*/*, each MANIFEST.json
says how): every servable drafter, into every format. A conversion keeps what each engine builds: for every
profile that reads both the source and the output, ``eaglehub.profiles.read`` gives the same reading field by
field (compared here, independently of convert's own check), except the aux layers a profile read another way
from the source and now reads as the producer trained them; the output is detected as the asked format and
validates with no error under every profile that serves it. A format that cannot express the drafter is
refused, naming why.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.paths import ROOT
from safetensors import safe_open

from eaglehub.checks.context import Options
from eaglehub.checks.validate import validate
from eaglehub.cli import main
from eaglehub.convert.run import convert
from eaglehub.convert.write import check_written
from eaglehub.errors import EaglehubError
from eaglehub.formats.registry import FORMATS, read_drafter
from eaglehub.io.schemas import schema_errors
from eaglehub.profiles import FIELDS, PROFILES, Stored, read, stored_of
from eaglehub.profiles.registry import SGLANG

PRODUCERS = ROOT / "fixtures" / "producers"
AUX = "eagle_aux_hidden_state_layer_ids"
VERIFIER = "HuggingFaceTB/SmolLM2-135M-Instruct"
#: reading fields compared: all but the profile's name and the vLLM class's parameter names (they follow from the
#: other fields; the loader's use of each parameter is compared as weights below)
COMPARED = [f for f in FIELDS if f not in ("profile", "parameter_names")]
#: failures of a profile that come from the layout: that engine does not read the checkpoint at all
LAYOUT_FAILURES = {"speculators_config", "speculators_model_type", "transformer_layer_config", "architectures"}


def servable() -> list[Path]:
    """Every committed case of every producer MANIFEST that is a drafter an engine loads (the training runs say
    ``"servable": false``)."""
    out = []
    for manifest in sorted(PRODUCERS.glob("*/MANIFEST.json")):
        for case in json.loads(manifest.read_text())["cases"]:
            if case.get("servable", True) and case.get("committed", True):
                out.append(manifest.parent / case["dir"])
    return out


CASES = [(src, fmt) for src in servable() for fmt in FORMATS]


def test_every_fixture_directory_is_in_its_manifest():
    """Nothing under fixtures/producers/*/ escapes the parametrisation below unseen."""
    for manifest in PRODUCERS.glob("*/MANIFEST.json"):
        listed = {c["dir"] for c in json.loads(manifest.read_text())["cases"]}
        on_disk = {p.name for p in manifest.parent.iterdir() if p.is_dir()}
        assert on_disk <= listed, (manifest, on_disk - listed)
    assert {p.name for p in servable()} >= {"eagle3-sglang", "api-eagle3", "bf16-base", "eagle3"}
    assert not any(p.name == "train-run" for p in servable())


def reads(r) -> bool:
    return not any(f.field in LAYOUT_FAILURES for f in r.failures)


def trained_c_in(cfg: dict) -> list[int] | None:
    """The layers the producer trained the drafter on, in C-in terms, by the producers' conventions: a top-level
    list is C-in (speculators, vLLM-native); SpecForge, TorchSpec and ModelOpt store a nested C-out list."""
    if isinstance(cfg.get(AUX), list):
        return list(cfg[AUX])
    nested = (cfg.get("eagle_config") or {}).get(AUX)
    return [i + 1 for i in nested] if isinstance(nested, list) else None


def weights(r) -> set[str]:
    """What the loader does per engine parameter (stored names differ by layout: midlayer. / layers.0.); tensors
    it skips build nothing."""
    return {
        f"{w.param or w.stored.replace('midlayer.', 'layers.0.')}: {w.fate}" for w in r.weights if w.fate != "skipped"
    }


def cannot_express(src: Path, fmt: str) -> list[str]:
    """Why ``fmt`` cannot hold the drafter, from what vLLM builds of the source (docs/formats.md §5): a word each
    reason's refusal must name."""
    r = read(src, "vllm-0.32-cpu")
    cfg = json.loads((src / "config.json").read_text())
    with safe_open(str(src / "model.safetensors"), framework="np") as f:
        names = set(f.keys())
    nested = {"specforge", "torchspec", "modelopt"}
    why = []
    if r.layer_kind == "qwen3" and fmt in nested:
        why.append("Qwen3")
    if r.layer_kind == "mla" and fmt in ("speculators", "specforge"):
        why.append("MLA")
    if r.norm_before_residual and fmt in nested:
        why.append("norm_before_residual")
    if (r.norm_before_fc or "input_norm.weight" in names) and fmt == "specforge":
        why.append("norm_before_fc")
    if "embed_tokens.weight" in names and fmt == "modelopt":
        why.append("embed_tokens")
    if r.num_hidden_layers > 1 and fmt in ("specforge", "torchspec"):
        why.append("decoder layer")
    if r.fc_norm and r.target_hidden_size != r.hidden_size and fmt == "speculators":
        why.append("fc_norm")
    assert cfg  # read above for the stored spelling; the reasons come from the reading
    return why


def source_errors(src: Path) -> list[str]:
    """Error findings of the source that concern its files, not an engine (convert refuses those)."""
    rep = validate(src, options=Options(profiles=tuple(PROFILES)))
    return sorted({f["code"] for f in rep["findings"] if f["severity"] == "error" and not f.get("profiles")})


@pytest.mark.parametrize(("src", "fmt"), CASES, ids=[f"{s.parent.name}/{s.name}-to-{f}" for s, f in CASES])
def test_conversion_keeps_what_every_engine_builds(src, fmt, tmp_path):
    out = tmp_path / "out"
    why = cannot_express(src, fmt)
    try:
        report = convert(src, out, fmt=fmt, verifier=VERIFIER)
    except EaglehubError as exc:
        text = str(exc)
        assert exc.exit_code == 1 and not out.exists(), text
        if why:
            assert "cannot express" in text and all(w in text for w in why), (why, text)
        else:  # refused for the source's own faults (those convert cannot repair), which validate names too
            errors = source_errors(src)
            assert "refusing to convert" in text and errors and all(c in text for c in errors), (errors, text)
        return
    assert not why, f"{fmt} cannot express {src.name} ({why}), yet it was converted"
    assert schema_errors(report, "convert-report") == []
    assert read_drafter(out).format == fmt
    src_cfg = json.loads((src / "config.json").read_text())
    trained = trained_c_in(src_cfg)
    # a plain conversion states only the repairs it lists (a config value the tensors prove wrong for an
    # engine): the source with those applied is what every engine must build from the output
    repaired = json.loads(json.dumps(src_cfg))
    for change in report["config_changes"]:
        assert change["why"], change
        *parents, leaf = change["key"].split(".")
        node = repaired
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = change["new"]
    stored = stored_of(read_drafter(src))
    intended = Stored(repaired, stored.tensors)
    serving = []
    for pid in PROFILES:
        p = PROFILES[pid]
        r_src, r_out = read(intended, p), read(out, p)
        if reads(r_out):
            serving.append(pid)
        if not (reads(r_src) and reads(r_out)):
            continue
        a, b = r_src.as_dict(), r_out.as_dict()
        for name in COMPARED:
            if name == "aux_layer_ids" and a[name] != b[name]:
                # a correction: the output puts the trained layers in the list this engine reads
                want = [i - 1 for i in trained] if p.engine == SGLANG else trained
                assert trained and b[name] == want and a[name] != want, (pid, a[name], b[name], trained)
                continue
            assert a[name] == b[name], f"{pid}: {name} {a[name]!r} -> {b[name]!r}"
        assert weights(r_src) == weights(r_out), pid
    assert serving, "no engine reads the output"
    rep = validate(out, options=Options(profiles=tuple(serving)))
    assert [f for f in rep["findings"] if f["severity"] == "error"] == []
    # the convert report says the same per profile
    listed = {e["profile"]: e for e in report["profiles"]["readings"]}
    assert report["profiles"]["default"] and set(listed) == set(PROFILES)
    assert {pid for pid, e in listed.items() if e["output_reads"]} == set(serving)
    check_stamps(src, out, fmt, src_cfg)


def check_stamps(src: Path, out: Path, fmt: str, src_cfg: dict) -> None:
    """An output carries a producer's stamp only where the producer wrote it and the output keeps its format."""
    cfg = json.loads((out / "config.json").read_text())
    with safe_open(str(out / "model.safetensors"), framework="np") as f:
        meta = f.metadata() or {}
    producer = read_drafter(src).format
    assert ("torchspec_version" in meta) == (producer == fmt == "torchspec"), meta
    assert ("_torchspec_version" in cfg) == (producer == fmt == "torchspec")
    assert ("speculators_version" in cfg) == ("speculators_version" in src_cfg and fmt == "speculators")
    if fmt == "speculators":
        verifier = cfg["speculators_config"]["verifier"]
        assert verifier["name_or_path"] == VERIFIER or producer == "speculators"
        assert verifier["architectures"], "the verifier's classes are known (SmolLM2: LlamaForCausalLM)"


# --- what each item of the conversion contract looks like on one fixture -----------------------------------------


def test_torchspec_export_converts_to_every_layout_without_its_stamp(tmp_path):
    """TorchSpec stamps its exports (safetensors metadata torchspec_version, config _torchspec_version); an output in
    another layout without the stamp is read as that layout, and the speculators one is no longer ambiguous."""
    src = PRODUCERS / "torchspec" / "eagle3-vllm"
    for fmt in ("vllm", "specforge", "speculators"):
        convert(src, tmp_path / fmt, fmt=fmt, verifier=VERIFIER)
        result = CliRunner().invoke(main, ["inspect", str(tmp_path / fmt), "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["format"] == fmt


def test_the_read_back_names_no_option_the_user_did_not_give(tmp_path):
    copy = tmp_path / "ts"
    shutil.copytree(PRODUCERS / "torchspec" / "eagle3", copy)
    with pytest.raises(EaglehubError) as exc:
        check_written(copy, "vllm", set())
    assert "reads as torchspec, not vllm" in exc.value.message and "--from" not in str(exc.value)
    assert exc.value.hint == "report this bug"


def test_the_producer_flag_follows_the_drafter_and_spares_eaglehubs_own_upgrade(tmp_path):
    """W-PRODUCER-FLAG (SpecForge once wrote norm_output true for pre-norm feedback) is about the weights, so it
    follows a SpecForge drafter into the vLLM layout; eaglehub's --to 3.1 (which sets norm_output itself) and a
    --set norm_output=true do not get it."""

    def flagged(path: Path) -> list[str]:
        return [f["message"] for f in validate(path)["findings"] if f["code"] == "W-PRODUCER-FLAG"]

    src = PRODUCERS / "specforge" / "eagle3.1-sglang-fc-norm"
    assert flagged(src)
    convert(src, tmp_path / "v", fmt="vllm")
    assert json.loads((tmp_path / "v" / "eaglehub.json").read_text())["producer"] == "specforge"
    assert [m for m in flagged(tmp_path / "v") if "specforge (converted to vllm)" in m]
    convert(tmp_path / "v", tmp_path / "t", fmt="torchspec")  # through a second conversion
    assert flagged(tmp_path / "t")
    convert(PRODUCERS / "specforge" / "eagle3-sglang", tmp_path / "up", to="3.1")
    assert read_drafter(tmp_path / "up").config["norm_output"] is True and not flagged(tmp_path / "up")
    convert(src, tmp_path / "off", settings={"norm_output": False})
    convert(tmp_path / "off", tmp_path / "on", settings={"norm_output": True})
    assert not flagged(tmp_path / "on")


def test_a_training_runs_files_are_left_out_and_listed(tmp_path):
    src = PRODUCERS / "speculators" / "train-eagle3-plain"
    (tmp_path / "src").mkdir()
    for p in src.iterdir():
        shutil.copy2(p, tmp_path / "src" / p.name)
    (tmp_path / "src" / "tokenizer.json").write_text("{}")
    (tmp_path / "src" / "README.md").write_text("card\n")
    (tmp_path / "src" / "config.py").write_text("# speculators' own source, copied by save_pretrained\n")
    report = convert(tmp_path / "src", tmp_path / "out", fmt="vllm")
    assert report["copied_files"] == ["README.md", "tokenizer.json"]
    assert report["skipped_files"] == [
        "config.py",
        "optimizer_state_dict.pt",
        "scheduler_state_dict.pt",
        "train_command.txt",
        "training_state.json",
        "val_metrics.json",
    ]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "README.md",
        "config.json",
        "eaglehub.json",
        "model.safetensors",
        "tokenizer.json",
    ]
    result = CliRunner().invoke(main, ["convert", str(tmp_path / "src"), str(tmp_path / "cli"), "--format", "vllm"])
    assert result.exit_code == 0, result.output
    assert "left out (not part of a served drafter): config.py, optimizer_state_dict.pt" in " ".join(
        result.output.split()
    )


def test_the_verifier_classes_come_from_the_target_or_the_report_says_what_is_missing(tmp_path):
    src = PRODUCERS / "specforge" / "eagle3-sglang"
    target = tmp_path / "target"
    target.mkdir()
    (target / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"]}))
    convert(src, tmp_path / "local", fmt="speculators", verifier=str(target))
    cfg = json.loads((tmp_path / "local" / "config.json").read_text())
    assert cfg["speculators_config"]["verifier"]["architectures"] == ["Qwen3ForCausalLM"]
    report = convert(src, tmp_path / "unknown", fmt="speculators", verifier="someorg/unknown-target")
    cfg = json.loads((tmp_path / "unknown" / "config.json").read_text())
    assert cfg["speculators_config"]["verifier"] == {"name_or_path": "someorg/unknown-target", "architectures": []}
    missing = [w for w in report["warnings"] if "verifier.architectures is []" in w]
    assert missing and "hf download someorg/unknown-target config.json" in missing[0]


def test_a_full_vocabulary_drafter_gets_no_identity_maps(tmp_path):
    """ModelOpt bf16-base keeps the whole vocabulary: SpecForge's layout used to get an identity d2t, which vLLM
    (>= 0.30) refuses: it has no draft_id_to_target_id parameter when Vd == V."""
    src = PRODUCERS / "modelopt" / "bf16-base"
    report = convert(src, tmp_path / "sf", fmt="specforge")
    with safe_open(str(tmp_path / "sf" / "model.safetensors"), framework="np") as f:
        assert not {"d2t", "t2d"} & set(f.keys())
    assert report["synthesized_tensors"] == []
    assert read(tmp_path / "sf", "vllm-0.33-gpu").loads


def test_a_difference_no_option_states_is_refused_naming_profile_field_and_values(tmp_path, monkeypatch):
    """A writer that changed what an engine builds (here: a rope_theta of its own) is caught before DST appears."""
    fmt = FORMATS["vllm"]
    original = type(fmt).write_config

    def wrong(self, d, carried, target):
        return {**original(self, d, carried, target), "rope_theta": 20000.0}

    monkeypatch.setattr(type(fmt), "write_config", wrong)
    with pytest.raises(EaglehubError) as exc:
        convert(PRODUCERS / "specforge" / "eagle3-sglang", tmp_path / "out", fmt="vllm")
    assert "(vllm-0.33-gpu): rope_theta is 10000.0 from the source, 20000.0 from the output" in exc.value.message
    assert exc.value.exit_code == 1 and "--profile" in (exc.value.hint or "") and not (tmp_path / "out").exists()


def test_stated_changes_are_listed_per_profile(tmp_path):
    src = PRODUCERS / "specforge" / "eagle3-sglang"
    report = convert(src, tmp_path / "up", fmt="vllm", to="3.1")
    by = {e["profile"]: e for e in report["profiles"]["readings"]}
    sglang = {c["field"]: c for c in by["sglang-0.5.23"]["changes"]}
    assert sglang["fc_norm"] == {"field": "fc_norm", "source": False, "output": True, "why": "--to 3.1"}
    assert sglang["norm_output"]["why"] == "--to 3.1" and "aux_layer_ids" not in sglang  # SGLang read them right
    v1 = {c["field"]: c for c in by["vllm-0.33-v1"]["changes"]}
    assert (v1["aux_layer_ids"]["source"], v1["aux_layer_ids"]["output"]) == ([1, 3, 4], [2, 4, 5])
    assert "trained with (C-in [2, 4, 5])" in v1["aux_layer_ids"]["why"]
    mrv2 = {c["field"]: c for c in by["vllm-0.33-gpu"]["changes"]}
    assert (mrv2["aux_layer_ids"]["source"], mrv2["aux_layer_ids"]["output"]) == (None, [2, 4, 5])
    forced = convert(PRODUCERS / "speculators" / "train-eagle3-plain", tmp_path / "sf", fmt="specforge", force=True)
    nbr = [c for e in forced["profiles"]["readings"] for c in e["changes"] if c["field"] == "norm_before_residual"]
    assert nbr and all(c["why"].startswith("--force: specforge has no norm_before_residual") for c in nbr)


def test_set_is_written_where_each_engine_reads_it_and_unread_keys_are_named(tmp_path):
    src = PRODUCERS / "specforge" / "eagle3-sglang"
    report = convert(src, tmp_path / "aux", settings={AUX: [3, 5, 6]})
    cfg = json.loads((tmp_path / "aux" / "config.json").read_text())
    assert cfg["eagle_config"][AUX] == [2, 4, 5]  # the nested list SGLang reads, C-out
    by = {e["profile"]: {c["field"]: c["output"] for c in e["changes"]} for e in report["profiles"]["readings"]}
    assert by["sglang-0.5.23"]["aux_layer_ids"] == [2, 4, 5] and by["vllm-0.33-gpu"]["aux_layer_ids"] == [3, 5, 6]
    spec = PRODUCERS / "speculators" / "api-eagle3"
    report = convert(spec, tmp_path / "spec", settings={"rope_theta": 20000.0, "not_a_model_key": 1})
    unread = {e["profile"]: e["unread_settings"] for e in report["profiles"]["readings"] if e["source_reads"]}
    assert unread and all(keys == ["not_a_model_key"] for keys in unread.values())


def test_profile_chooses_what_is_checked_and_the_text_says_so(tmp_path):
    src = str(PRODUCERS / "speculators" / "api-eagle3")
    run = CliRunner().invoke(
        main, ["convert", src, str(tmp_path / "a"), "--format", "vllm", "--profile", "sglang-0.5.23", "--json"]
    )
    assert run.exit_code == 0, run.output
    section = json.loads(run.stdout)["profiles"]
    assert section["checked"] == ["sglang-0.5.23"] and section["default"] is False
    assert section["readings"][0]["source_reads"] is False and section["readings"][0]["output_reads"] is True
    run = CliRunner().invoke(main, ["convert", src, str(tmp_path / "b"), "--format", "specforge"])
    text = " ".join(run.output.split())
    assert run.exit_code == 0, run.output
    assert "what each engine builds, source → output (every named profile; --profile to choose)" in text
    assert "sglang-0.5.23: reads the output, not the source: SGLang has no speculators reader" in text
    bad = CliRunner().invoke(main, ["convert", src, str(tmp_path / "c"), "--format", "vllm", "--profile", "trt"])
    assert bad.exit_code == 2 and "unknown engine profile 'trt'" in bad.output and not (tmp_path / "c").exists()


def test_an_engine_failure_the_source_has_too_is_said_not_a_refusal(tmp_path):
    """Four aux ids only in eagle_config (SpecForge's layout): Model Runner V2 never reads them (E-AUX-IGNORED on
    vllm-0.33-gpu), the V1 runner and SGLang do. Editing such a drafter within its layout is no bug of convert's:
    the copy is written, and the report and text say which profiles will not serve it."""
    from helpers.formats_factory import write_format

    src = write_format(tmp_path / "sf4", "specforge", aux_c_in=(2, 4, 5, 7)).path
    assert "E-AUX-IGNORED" in [f["code"] for f in validate(src)["findings"]]
    report = convert(src, tmp_path / "out", settings={"norm_output": False})
    assert not schema_errors(report, "convert-report")
    failing = {e["profile"]: [x["code"] for x in e["output_errors"]] for e in report["profiles"]["readings"]}
    assert failing == {
        "vllm-0.33-gpu": ["E-AUX-IGNORED"],
        "vllm-0.33-v1": [],
        "vllm-0.32-cpu": [],
        "vllm-0.32-gpu": ["E-AUX-IGNORED"],
        "sglang-0.5.23": [],
    }
    res = CliRunner().invoke(main, ["convert", str(src), str(tmp_path / "out2"), "--set", "norm_output=false"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "will not serve it: E-AUX-IGNORED" in text and "--profile vllm-0.33-gpu --profile vllm-0.32-gpu" in text
