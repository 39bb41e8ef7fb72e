"""Findings on the checkpoints the real producers write (fixtures/producers/*/, made by each producer's own code;
see each MANIFEST.json): what validate and inspect say about them must be what the engines do with them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers.paths import ROOT
from safetensors import safe_open

from eaglehub.checks.context import Options
from eaglehub.checks.validate import validate
from eaglehub.checks.vocab import check_vocab_maps
from eaglehub.cli import main

PRODUCERS = ROOT / "fixtures" / "producers"
#: every profile a producer fixture is judged for
ALL_PROFILES = ("vllm-0.33-gpu", "vllm-0.33-v1", "vllm-0.32-cpu", "sglang-0.5.23")


def fixture(name: str) -> Path:
    return PRODUCERS / name


def manifest_case(producer: str, case: str) -> dict:
    data = json.loads((PRODUCERS / producer / "MANIFEST.json").read_text())
    return next(c for c in data["cases"] if c["dir"] == case)


def tensor(path: Path, name: str) -> np.ndarray:
    """One integer or bool tensor of ``path``'s model.safetensors (numpy has no bfloat16)."""
    with safe_open(str(path / "model.safetensors"), framework="np") as f:
        return f.get_tensor(name)


def report(path: Path, deep: bool = False, profiles=ALL_PROFILES, **kw) -> dict:
    return validate(path, deep=deep, options=Options(profiles=tuple(profiles)), **kw)


def codes(rep: dict, severity: str | None = None) -> list[str]:
    return [f["code"] for f in rep["findings"] if severity is None or f["severity"] == severity]


def run_cli(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args])


# --- 1. d2t in frequency order (ModelOpt) ---------------------------------------------------------------------


@pytest.mark.parametrize("case", ["pruned-vocab", "smollm2-pruned"])
def test_modelopt_frequency_ordered_d2t_is_valid(case):
    """ModelOpt's calibrate_frequent_vocab stores d2t most frequent first (the MANIFEST records it unsorted);
    vLLM scatters by id (``logits_new[:, arange(Vd) + d2t] = logits``), so the order is no error."""
    path = fixture(f"modelopt/{case}")
    d2t = tensor(path, "d2t")
    ids = np.arange(len(d2t)) + d2t
    assert not bool((ids[1:] > ids[:-1]).all())  # the fixture really is unsorted
    assert "d2t: not sorted" in manifest_case("modelopt", case)["notes"]
    rep = report(path)
    assert codes(rep, "error") == []
    assert not [c for c in codes(rep) if c.startswith(("E-D2T", "E-T2D"))]


def test_a_repeated_target_id_is_still_an_error():
    d2t = tensor(fixture("modelopt/pruned-vocab"), "d2t").copy()
    ids = np.arange(len(d2t)) + d2t
    d2t[7] = ids[3] - 7  # row 7 now names row 3's id
    found = check_vocab_maps(d2t, None, 512, len(d2t))
    dup = [f for f in found if f.code == "E-D2T-DUPLICATE"]
    assert len(dup) == 1 and f"rows 3 and 7 both map to {int(ids[3])}" in dup[0].message
    d2t[7] = 600 - 7  # past V = 512
    assert "E-D2T-RANGE" in {f.code for f in check_vocab_maps(d2t, None, 512, len(d2t))}


def test_unsorted_d2t_converts_with_its_rows_and_a_matching_t2d(tmp_path):
    """Every output format keeps ModelOpt's row order; the t2d written for SpecForge marks the same ids."""
    src = fixture("modelopt/pruned-vocab")
    before = {n: tensor(src, n) for n in ("d2t",)}
    out = tmp_path / "sf"
    r = run_cli("convert", src, out, "--format", "specforge")
    assert r.exit_code == 0, r.output
    after = {n: tensor(out, n) for n in ("d2t", "t2d")}
    assert np.array_equal(after["d2t"], before["d2t"])
    ids = np.arange(len(before["d2t"])) + before["d2t"]
    assert int(after["t2d"].sum()) == len(ids) and bool(after["t2d"][ids].all())
    assert codes(report(out), "error") == []


# --- 2. null aux ids (speculators convert) ----------------------------------------------------------------------

SPECULATORS_CONVERT = [
    "convert-eagle3",
    "convert-eagle3-embed",
    "convert-eagle3.1-flags",
    "convert-eagle3.1-research",
    "convert-smollm2-eagle3",
]


@pytest.mark.parametrize("case", SPECULATORS_CONVERT)
def test_null_aux_ids_from_speculators_convert_are_valid(case):
    """``speculators convert`` writes ``eagle_aux_hidden_state_layer_ids: null``; vLLM's adapter copies only a
    non-empty list and the runner then captures the target's defaults (no error, nothing dropped)."""
    path = fixture(f"speculators/{case}")
    assert json.loads((path / "config.json").read_text())["eagle_aux_hidden_state_layer_ids"] is None
    assert "'eagle_aux_hidden_state_layer_ids'" in manifest_case("speculators", case)["notes"]
    rep = report(path)
    assert "E-CONFIG-SCHEMA" not in codes(rep)


def test_null_aux_ids_read_as_the_targets_defaults_and_convert(tmp_path):
    from eaglehub.formats.registry import read_drafter
    from eaglehub.profiles import read

    path = fixture("speculators/convert-eagle3")
    reading = read(read_drafter(path), "vllm-0.33-v1")
    assert reading.aux_layer_ids is None and reading.num_aux_hidden_states == 3  # the target's default layers
    r = run_cli("convert", path, tmp_path / "out", "--format", "vllm")
    assert r.exit_code == 0, r.output
    assert codes(report(tmp_path / "out", profiles=ALL_PROFILES[:3]), "error") == []


# --- 3. float32 weights under a bfloat16 config (ModelOpt from a float32 base) --------------------------------------


def test_modelopt_fp32_export_is_a_note_not_an_error():
    """ModelOpt casts the EAGLE module to the base's dtype (float32) but writes the recipe's torch_dtype
    (bfloat16); vLLM builds the drafter in the target's dtype and casts each weight at load."""
    path = fixture("modelopt/fp32-base")
    notes = manifest_case("modelopt", "fp32-base")["notes"]
    assert "tensor dtypes: {'F32': 13}" in notes and "config dtype: bfloat16" in notes
    rep = report(path)
    assert codes(rep, "error") == []
    cast = [f for f in rep["findings"] if f["code"] == "I-TENSOR-DTYPE-CAST"]
    assert len(cast) == 1 and cast[0]["severity"] == "info"
    msg = cast[0]["message"]
    assert msg.startswith(
        "13 weight(s) are stored as float32 (e.g. fc.weight) but the config's torch_dtype is bfloat16"
    )
    assert "the target's dtype" in msg and msg.endswith("so the file holds them in twice the bytes of bfloat16")


def test_inspect_reports_the_stored_dtype_and_the_config_dtype_apart():
    path = fixture("modelopt/fp32-base")
    r = run_cli("inspect", path, "--json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert (rep["dtype"], rep["config_dtype"]) == ("float32", "bfloat16")
    assert {t["dtype"] for t in rep["tensors"]} == {"float32"}
    text = run_cli("inspect", path).stdout
    assert "weights float32 (config torch_dtype bfloat16)" in " ".join(text.split())
    same = json.loads(run_cli("inspect", fixture("modelopt/bf16-base"), "--json").stdout)
    assert (same["dtype"], same["config_dtype"]) == ("bfloat16", "bfloat16")


def test_modelopt_fp32_export_converts(tmp_path):
    r = run_cli("convert", fixture("modelopt/fp32-base"), tmp_path / "out", "--format", "vllm")
    assert r.exit_code == 0, r.output
    assert codes(report(tmp_path / "out"), "error") == []


# --- 4. raw training checkpoints ---------------------------------------------------------------------------------

TORCHSPEC_RUN = PRODUCERS / "torchspec" / "train-run"
TORCHSPEC_ITER = TORCHSPEC_RUN / "checkpoints" / "iter_0000001"
#: the --config / --target-model-path values depend on whether config.yaml's paths exist on this machine (tested
#: below on copies of the run, where they are made to exist or not)
TORCHSPEC_EXPORT = f"python tools/convert_to_hf.py --input-dir {TORCHSPEC_ITER} --config "


def _speculators_save_path(tmp_path: Path) -> Path:
    """What ``speculators train --save-path`` leaves (speculators/train/checkpointer.py; the MANIFEST's notes list
    it beside each train-* case): epoch directories, a ``checkpoint_best`` link, run.yaml, train_command.txt. The
    epoch is the committed train-eagle3-defaults case, which is that directory exactly as the trainer wrote it."""
    case = "train-eagle3-defaults"
    notes = manifest_case("speculators", case)["notes"]
    assert "checkpoint_best, epoch0_end, run.yaml, train_command.txt" in notes
    root = tmp_path / case
    shutil.copytree(fixture(f"speculators/{case}"), root / "0")
    (root / "checkpoint_best").symlink_to("0", target_is_directory=True)
    (root / "epoch0_end").symlink_to("0", target_is_directory=True)
    (root / "run.yaml").write_text("train:\n  trainer:\n    save_path: train/train-eagle3-defaults\n")
    shutil.copy(root / "0" / "train_command.txt", root / "train_command.txt")
    return root


RAW = [
    (
        "specforge/train-run",
        "is a SpecForge training checkpoint (tiny-latest -> tiny-step1/training_state.pt), not a servable drafter",
        f"specforge export --to sglang --checkpoint {PRODUCERS / 'specforge/train-run'} --draft-config "
        f"DRAFT_CONFIG.json --output-dir {PRODUCERS / 'specforge/train-run'}-sglang",
    ),
    (
        "specforge/train-run/tiny-step1",
        "is a SpecForge training checkpoint (training_state.pt: draft weights, optimizer and step)",
        f"specforge export --to sglang --checkpoint {PRODUCERS / 'specforge/train-run/tiny-step1'}",
    ),
    ("torchspec/train-run", "is a TorchSpec training checkpoint (iter_0000001: FSDP shards", TORCHSPEC_EXPORT),
    ("torchspec/train-run/checkpoints", "is a TorchSpec training checkpoint", TORCHSPEC_EXPORT),
    ("torchspec/train-run/checkpoints/iter_0000001", "is a TorchSpec training checkpoint", TORCHSPEC_EXPORT),
    ("torchspec/train-run/checkpoints/iter_0000001/model", "is a TorchSpec training checkpoint", TORCHSPEC_EXPORT),
]


@pytest.mark.parametrize(("case", "says", "command"), RAW, ids=[c[0] for c in RAW])
def test_a_training_checkpoint_is_named_with_its_export_command(case, says, command):
    path = PRODUCERS / case
    for verb in (["inspect"], ["inspect", "--json"], ["convert", "--format", "vllm"]):
        args = [verb[0], path, *(["/tmp/never-written"] if verb[0] == "convert" else []), *verb[1:]]
        r = run_cli(*args)
        assert r.exit_code == 2 and "config.json is missing" not in r.output, r.output
        flat = " ".join(r.output.split())
        assert says in flat and command in flat and "Traceback" not in r.output
    rep = json.loads(run_cli("validate", path, "--json").stdout)
    assert rep["ok"] is False and [f["code"] for f in rep["findings"]] == ["E-INPUT-RAW"]
    raw = rep["findings"][0]
    assert says in raw["message"] and command in raw["hint"]


def test_torchspec_export_command_is_the_producers_own():
    """The command named takes the arguments the fixtures' own exports were made with (MANIFEST: eagle3's
    ``how``), filled in from the run's config.yaml."""
    how = manifest_case("torchspec", "eagle3")["how"].split()
    rep = json.loads(run_cli("validate", TORCHSPEC_RUN, "--json").stdout)
    named = rep["findings"][0]["hint"].split("`")[1].split()
    assert named[:2] == how[:2] == ["python", "tools/convert_to_hf.py"]
    assert sorted(a for a in named if a.startswith("--")) == sorted(a for a in how if a.startswith("--"))
    assert named[named.index("--input-dir") + 1] == str(TORCHSPEC_ITER)


def _torchspec_run(tmp_path: Path, draft_config: str, target: str) -> Path:
    """A copy of the committed TorchSpec run whose config.yaml records these two paths instead (as a run copied
    from another machine records that machine's)."""
    import yaml

    run = tmp_path / "train-run"
    shutil.copytree(TORCHSPEC_RUN, run)
    text = (run / "config.yaml").read_text()
    model = yaml.safe_load(text)["model"]
    text = text.replace(model["draft_model_config"], draft_config).replace(model["target_model_path"], target)
    (run / "config.yaml").write_text(text)
    assert yaml.safe_load(text)["model"]["draft_model_config"] == draft_config
    return run


def _export_hint(path: Path) -> tuple[str, str]:
    rep = json.loads(run_cli("validate", path, "--json").stdout)
    assert [f["code"] for f in rep["findings"]] == ["E-INPUT-RAW"]
    hint = rep["findings"][0]["hint"]
    return hint.split("`")[1], hint.split("`")[2]


def test_torchspec_export_names_no_recorded_path_missing_here(tmp_path):
    """config.yaml's paths are the training machine's: where they are not here, the command has placeholders and
    the hint says what config.yaml recorded."""
    gone = tmp_path / "training-box"
    run = _torchspec_run(tmp_path, f"{gone}/tiny/draft_config.json", f"{gone}/targets/tiny-llama-8l")
    iter_dir = run / "checkpoints" / "iter_0000001"
    for path in (run, iter_dir, iter_dir / "model"):
        command, notes = _export_hint(path)
        assert command == (
            f"python tools/convert_to_hf.py --input-dir {iter_dir} --config DRAFT_CONFIG.json "
            f"--target-model-path TARGET_MODEL_DIR --output-dir {iter_dir}_hf"
        )
        assert str(gone) not in command
        assert f"config.yaml recorded {gone}/tiny/draft_config.json, which is not on this machine" in notes
        assert f"config.yaml recorded {gone}/targets/tiny-llama-8l, which is not on this machine" in notes
    r = run_cli("inspect", run)
    assert r.exit_code == 2 and "--config DRAFT_CONFIG.json" in " ".join(r.output.split())


def test_torchspec_export_uses_recorded_paths_that_exist(tmp_path):
    """An absolute path that exists is named as recorded; a relative one is read from the run directory."""
    draft = tmp_path / "elsewhere" / "draft_config.json"
    draft.parent.mkdir()
    shutil.copy(fixture("torchspec/eagle3") / "config.json", draft)
    run = _torchspec_run(tmp_path, str(draft), "targets/tiny-llama-8l")
    (run / "targets" / "tiny-llama-8l").mkdir(parents=True)
    iter_dir = run / "checkpoints" / "iter_0000001"
    command, notes = _export_hint(run)
    assert command == (
        f"python tools/convert_to_hf.py --input-dir {iter_dir} --config {draft} "
        f"--target-model-path {run / 'targets' / 'tiny-llama-8l'} --output-dir {iter_dir}_hf"
    )
    assert "not on this machine" not in notes and "DRAFT_CONFIG" not in command


def test_torchspec_export_keeps_a_hub_target(tmp_path):
    """convert_to_hf.py --target-model-path also takes a Hub id (it downloads it): that is no missing path."""
    run = _torchspec_run(tmp_path, str(tmp_path / "gone.json"), "HuggingFaceTB/SmolLM2-135M")
    command, notes = _export_hint(run)
    assert "--config DRAFT_CONFIG.json --target-model-path HuggingFaceTB/SmolLM2-135M --output-dir" in command
    assert "TARGET_MODEL_DIR" not in notes and f"config.yaml recorded {tmp_path / 'gone.json'}" in notes


def test_specforge_run_export_cites_the_step_specforge_resolves(tmp_path):
    """`specforge export --checkpoint RUN_DIR` reads the step its one *-latest link points at, else the highest
    step number (SpecForge 0.2.0 resolve_training_state): the message cites that step, not an older one."""
    run = tmp_path / "train-run"
    shutil.copytree(fixture("specforge/train-run"), run, symlinks=True)
    for step in (2, 10):
        shutil.copytree(run / "tiny-step1", run / f"tiny-step{step}")
    (run / "tiny-latest").unlink()
    (run / "tiny-latest").symlink_to("tiny-step10", target_is_directory=True)

    def cited(path: Path) -> tuple[str, str]:
        rep = json.loads(run_cli("validate", path, "--json").stdout)
        assert [f["code"] for f in rep["findings"]] == ["E-INPUT-RAW"]
        return rep["findings"][0]["message"], rep["findings"][0]["hint"].split("`")[1]

    message, command = cited(run)
    assert "(tiny-latest -> tiny-step10/training_state.pt)" in message
    assert command.startswith(f"specforge export --to sglang --checkpoint {run} --draft-config DRAFT_CONFIG.json")
    (run / "tiny-latest").unlink()
    message, command = cited(run)
    assert "(tiny-step10/training_state.pt, the highest step)" in message
    assert f"--checkpoint {run} " in command
    (run / "tiny-latest").symlink_to("tiny-step2", target_is_directory=True)
    assert "(tiny-latest -> tiny-step2/training_state.pt)" in cited(run)[0]
    shutil.copytree(run / "tiny-step1", run / "other-step3")  # two runs: the export refuses the directory
    (run / "tiny-latest").unlink()
    message, command = cited(run)
    assert "tiny-step10/training_state.pt, the highest step of runs ['other', 'tiny']" in message
    assert f"--checkpoint {run / 'tiny-step10'} " in command


def test_a_speculators_save_path_points_at_its_epoch(tmp_path):
    root = _speculators_save_path(tmp_path)
    rep = json.loads(run_cli("validate", root, "--json").stdout)
    assert [f["code"] for f in rep["findings"]] == ["E-INPUT-RAW"]
    f = rep["findings"][0]
    assert f["message"] == (
        f"{root} is a speculators training save path (epoch checkpoints [0], checkpoint_best -> 0), "
        "not a servable drafter"
    )
    assert f["hint"].endswith(f"eaglehub validate {root / 'checkpoint_best'}")
    assert json.loads(run_cli("validate", root / "checkpoint_best", "--json").stdout)["layout"] == "speculators"


def test_a_config_next_to_a_training_checkpoint_is_still_named(tmp_path):
    """A config.json beside the shards (the TorchSpec draft config copied in, say) makes no drafter either."""
    iter_dir = tmp_path / "iter_0000001"
    shutil.copytree(TORCHSPEC_ITER, iter_dir)
    shutil.copy(fixture("torchspec/eagle3") / "config.json", iter_dir / "config.json")
    rep = json.loads(run_cli("validate", iter_dir, "--json").stdout)
    assert [(f["code"], f["subject"]) for f in rep["findings"]] == [("E-INPUT-RAW", "weight files")]
    assert "python tools/convert_to_hf.py --input-dir" in rep["findings"][0]["hint"]


# --- 5. TorchSpec --prune-vocab: lm_head rows cut by offset -----------------------------------------------------


def _rows(path: Path, name: str = "lm_head.weight") -> np.ndarray:
    from eaglehub.formats.registry import read_drafter

    d = read_drafter(path)
    return d.index.load_numpy(d.names[name])


def test_deep_validate_flags_the_offset_cut_and_passes_the_id_cut(tmp_path):
    """eagle3 (full vocabulary) and eagle3-prune-vocab are exports of the same training checkpoint: row i of the
    pruned head is the full head's row d2t[i] (the offset), not row i + d2t[i] (the token it scores), as TorchSpec's
    convert_to_hf.py --prune-vocab cuts it (``lm_head[d2t]``). --deep says so; the same file cut by id passes."""
    assert "lm_head[d2t]" in manifest_case("torchspec", "eagle3-prune-vocab")["notes"]
    path = fixture("torchspec/eagle3-prune-vocab")
    full, cut = _rows(fixture("torchspec/eagle3")), _rows(path)
    ids_ = np.arange(len(cut)) + tensor(path, "d2t")
    assert np.array_equal(cut, full[tensor(path, "d2t")]) and not np.array_equal(cut[1:], full[ids_][1:])
    assert "E-LMHEAD-OFFSET" not in codes(report(path))  # the rows' values are read only with --deep
    rep = report(path, deep=True)
    hits = [f for f in rep["findings"] if f["code"] == "E-LMHEAD-OFFSET"]
    assert rep["ok"] is False and len(hits) == 1 and hits[0]["subject"] == "lm_head.weight"
    d2t = tensor(path, "d2t")
    assert hits[0]["message"].startswith(
        f"lm_head has {len(np.unique(d2t))} distinct row(s) for {len(d2t)} draft ids, identical exactly where d2t "
        "repeats an offset (rows 2 and 3, offset 14, target ids 16 and 17)"
    )
    # the same export with the rows TorchSpec meant to keep (by target id) passes
    from safetensors.torch import load_file, save_file

    fixed = tmp_path / "by-id"
    shutil.copytree(path, fixed)
    tensors = load_file(str(fixed / "model.safetensors"))
    full = load_file(str(fixture("torchspec/eagle3") / "model.safetensors"))["lm_head.weight"]
    ids = np.arange(len(d2t)) + d2t
    tensors["lm_head.weight"] = full[ids].clone()
    save_file(tensors, str(fixed / "model.safetensors"), metadata={"torchspec_version": "0.1.0"})
    assert codes(report(fixed, deep=True), "error") == []


# --- 6. special-token ids no engine reads; stored tensor names -------------------------------------------------


def test_specforge_pad_id_is_not_compared_with_the_targets(make_target):
    """SpecForge writes pad_token_id 0 into every draft config (the MANIFEST's targets use 2, as SmolLM2 does); no
    engine reads a drafter's pad id, so it is no finding. A differing eos is still noted, as info."""
    path = fixture("specforge/eagle3-sglang")
    cfg = json.loads((path / "config.json").read_text())
    assert (cfg["bos_token_id"], cfg["eos_token_id"], cfg["pad_token_id"]) == (1, 2, 0)
    target = make_target(8, bos_token_id=1, eos_token_id=2, pad_token_id=2)
    rep = validate(path, target, options=Options(profiles=ALL_PROFILES))
    assert not [f for f in rep["findings"] if "TOKENS" in f["code"]]
    other = make_target(8, name="eos-differs", bos_token_id=1, eos_token_id=7, pad_token_id=2)
    found = [f for f in validate(path, other)["findings"] if "TOKENS" in f["code"]]
    assert [(f["code"], f["severity"], f["subject"]) for f in found] == [("I-TOKENS-SPECIAL", "info", "eos_token_id")]


def test_inspect_lists_tensors_by_their_stored_names():
    """TorchSpec --vllm and ModelOpt store layer 0 as layers.0.*; inspect shows that, not eaglehub's midlayer.*."""
    for case in ("torchspec/eagle3-vllm", "modelopt/bf16-base"):
        r = run_cli("inspect", fixture(case))
        assert r.exit_code == 0, r.output
        assert "layers.0.self_attn.q_proj.weight" in r.stdout and "midlayer." not in r.stdout
        rep = json.loads(run_cli("inspect", fixture(case), "--json").stdout)
        q = next(t for t in rep["tensors"] if t["name"] == "midlayer.self_attn.q_proj.weight")
        assert q["stored_name"] == "layers.0.self_attn.q_proj.weight"
    specforge = run_cli("inspect", fixture("specforge/eagle3-sglang")).stdout
    assert "midlayer.self_attn.q_proj.weight" in specforge  # SpecForge stores midlayer.*


def test_findings_name_tensors_as_stored(tmp_path):
    rep = report(fixture("modelopt/bf16-base"), deep=True)
    init = [f["subject"] for f in rep["findings"] if f["code"] == "W-TENSOR-INIT"]
    assert "layers.0.input_layernorm.weight" in init and not [s for s in init if s.startswith("midlayer.")]
    from safetensors.torch import load_file, save_file

    dropped = tmp_path / "dropped"
    shutil.copytree(fixture("modelopt/bf16-base"), dropped)
    tensors = load_file(str(dropped / "model.safetensors"))
    del tensors["layers.0.mlp.up_proj.weight"]
    save_file(tensors, str(dropped / "model.safetensors"))
    missing = [f for f in report(dropped)["findings"] if f["code"] == "E-TENSOR-MISSING"]
    assert [f["subject"] for f in missing] == ["layers.0.mlp.up_proj.weight"]
    assert missing[0]["message"].startswith("layers.0.mlp.up_proj.weight [128, 64] is missing")


# --- 8. the YaRN ModelOpt's exporter writes over the trained plain RoPE ------------------------------------------


def test_modelopt_export_rope_is_flagged_with_what_the_engines_apply(tmp_path):
    """smollm2-pruned was trained with rope_scaling {rope_type: default} (its MANIFEST ``how``) and exported with
    ModelOpt's eagle_export_rope_scaling; every profile builds YaRN from it. The figures match YaRN as transformers
    computes it (the same formulas vLLM's and SGLang's YaRN rotary embeddings use)."""
    import torch
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    case = manifest_case("modelopt", "smollm2-pruned")
    assert "eagle.eagle_architecture_config.rope_scaling={rope_type: default" in case["how"]
    path = fixture("modelopt/smollm2-pruned")
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["rope_scaling"] == {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 2048}
    rep = report(path)
    hits = [f for f in rep["findings"] if f["code"] == "W-ROPE-EXPORTED"]
    assert len(hits) == 1 and hits[0]["profiles"] == list(ALL_PROFILES) and hits[0]["subject"] == "rope_scaling"
    hf = LlamaConfig(
        hidden_size=576, num_attention_heads=9, head_dim=64, rope_theta=100000.0, rope_scaling=cfg["rope_scaling"]
    )
    inv_freq, attention = ROPE_INIT_FUNCTIONS["yarn"](hf, "cpu")
    plain = 1.0 / (100000.0 ** (torch.arange(0, 64, 2, dtype=torch.float) / 64))
    lowered = int((inv_freq < plain * (1 - 1e-6)).sum())
    assert (
        f"attention logits are scaled by {attention**2:.2f} and {lowered} of the 32 rotary frequencies"
        in (hits[0]["message"])
    )
    assert hits[0]["hint"].endswith("--set rope_scaling=null")
    fixed = tmp_path / "trained-rope"
    r = run_cli("convert", path, fixed, "--set", "rope_scaling=null")
    assert r.exit_code == 0, r.output
    assert "W-ROPE-EXPORTED" not in codes(report(fixed))
    assert "W-ROPE-EXPORTED" in codes(report(fixture("modelopt/bf16-base")))  # the recipe default RoPE too
    assert "W-ROPE-EXPORTED" not in codes(report(fixture("specforge/smollm2-eagle3-sglang")))


# --- 7. keys the speculators adapter drops ----------------------------------------------------------------------

SPECULATORS_ALL = sorted(p.name for p in (PRODUCERS / "speculators").iterdir() if (p / "config.json").is_file())


@pytest.mark.parametrize("case", SPECULATORS_ALL)
def test_a_dropped_key_the_layer_config_repeats_is_no_loss(case):
    """speculators writes tie_word_embeddings at the top and inside transformer_layer_config, with one value:
    the adapter drops the top-level copy and the engine reads the same value from the layer config."""
    cfg = json.loads((fixture(f"speculators/{case}") / "config.json").read_text())
    assert cfg["tie_word_embeddings"] == cfg["transformer_layer_config"]["tie_word_embeddings"]
    assert "W-SPECULATORS-DROPPED" not in codes(report(fixture(f"speculators/{case}")))


def _edited(tmp_path: Path, **top) -> Path:
    out = tmp_path / "edited"
    shutil.copytree(fixture("speculators/train-eagle3-plain"), out)
    cfg = json.loads((out / "config.json").read_text())
    cfg.update(top)
    (out / "config.json").write_text(json.dumps(cfg))
    return out


def test_a_dropped_key_whose_value_the_engine_does_not_get_is_said(tmp_path):
    d = _edited(tmp_path, tie_word_embeddings=True)  # the layer config keeps false
    hits = [f for f in report(d, profiles=["vllm-0.33-v1"])["findings"] if f["code"] == "W-SPECULATORS-DROPPED"]
    assert len(hits) == 1 and hits[0]["subject"] == "tie_word_embeddings"
    assert (
        "top-level tie_word_embeddings True (the engine reads False from transformer_layer_config)"
        in (hits[0]["message"])
    )
    assert hits[0]["hint"].endswith("--set transformer_layer_config.tie_word_embeddings=true")
    other = _edited(tmp_path / "b", rope_scaling_extra=7, unset_key=None)
    msgs = [f["message"] for f in report(other, profiles=["vllm-0.33-v1"])["findings"]]
    dropped = [m for m in msgs if "dropped by the speculators adapter" in m]
    assert len(dropped) == 1 and "rope_scaling_extra 7 (the engine's config has no such key)" in dropped[0]
    assert "unset_key" not in dropped[0]  # null is no value: nothing is lost


def test_force_converts_past_a_schema_error(tmp_path):
    """A schema error the user means to keep (an initializer_range of 0, which no engine reads) stops convert;
    --force converts the config as it is and says so."""
    src = tmp_path / "src"
    shutil.copytree(fixture("specforge/eagle3-sglang"), src)
    cfg = json.loads((src / "config.json").read_text())
    cfg["initializer_range"] = 0
    (src / "config.json").write_text(json.dumps(cfg))
    refused = run_cli("convert", src, tmp_path / "a", "--format", "vllm")
    assert refused.exit_code == 1 and "pass --force to convert the config as it is" in " ".join(refused.output.split())
    r = run_cli("convert", src, tmp_path / "b", "--format", "vllm", "--force", "--json")
    assert r.exit_code == 0, r.output
    warned = json.loads(r.stdout)["warnings"]
    assert (
        "converted with --force despite E-CONFIG-SCHEMA initializer_range: config.json: 0 is less than or equal to the minimum of 0"
        in warned
    )
    assert json.loads((tmp_path / "b" / "config.json").read_text())["initializer_range"] == 0


def test_the_reference_drafter_reads_a_frequency_ordered_map_as_a_sorted_one():
    """eaglehub's reference engine maps draft rows to target ids as vLLM does (``i + d2t[i]``, then a scatter by
    id): ModelOpt's frequency-ordered map and the same vocabulary sorted by id, with lm_head rows permuted
    alike, give the same target-vocabulary logits and the same greedy token."""
    import torch

    from eaglehub.formats.registry import read_drafter
    from eaglehub.model.eagle3 import DrafterDims, Eagle3Drafter

    d = read_drafter(fixture("modelopt/pruned-vocab"))
    tensors = {k: v.float() for k, v in d.load_all().items()}
    ids = torch.arange(len(tensors["d2t"])) + tensors["d2t"].long()
    order = torch.argsort(ids)
    by_id = dict(
        tensors, **{"d2t": ids[order] - torch.arange(len(ids)), "lm_head.weight": tensors["lm_head.weight"][order]}
    )

    def scattered(state: dict) -> tuple[torch.Tensor, int]:
        model = Eagle3Drafter(DrafterDims.from_config(d.config))
        model.load_state_dict(state, strict=False)
        model.d2t = model.d2t.long()
        normed = torch.linspace(-1, 1, d.dims.H)
        logits = model.logits(normed)
        full = torch.full((d.dims.V,), float("-inf"))
        full[model.to_target_ids(torch.arange(len(logits)))] = logits
        return full, int(model.to_target_ids(logits.argmax()))

    (a, greedy_a), (b, greedy_b) = scattered(tensors), scattered(by_id)
    assert not torch.equal(tensors["d2t"].long(), by_id["d2t"])  # the two maps really differ
    assert torch.equal(a, b) and greedy_a == greedy_b


# --- every fixture: detected as its producer's layout, no error where an engine serves it ------------------------

#: errors that are true of a producer's own output, with why: the test fails on any other error where the
#: profile's engine loads the drafter
TRUE_ERRORS = {
    # speculators convert drops the research checkpoint's fc_norm gains (its log names them "unexpected") and
    # writes fc_norm: true: vLLM builds fc_norm with nothing to fill it (missing tensors stay uninitialised)
    "speculators/convert-eagle3.1-flags": {"E-FCNORM-MISSING"},
    "speculators/convert-eagle3.1-research": {"E-FCNORM-MISSING"},
    # TorchSpec's --prune-vocab cuts lm_head by the offsets d2t[i], not the ids i + d2t[i] (--deep only)
    "torchspec/eagle3-prune-vocab": {"E-LMHEAD-OFFSET"},
    "torchspec/smollm2-eagle3-vllm-prune-vocab": {"E-LMHEAD-OFFSET"},
}


def servable_cases() -> list[str]:
    out = []
    for producer in ("speculators", "specforge", "modelopt", "torchspec"):
        data = json.loads((PRODUCERS / producer / "MANIFEST.json").read_text())
        out += [f"{producer}/{c['dir']}" for c in data["cases"] if c.get("servable", True) and c.get("committed", True)]
    return out


@pytest.mark.parametrize("case", servable_cases())
def test_every_producer_fixture_is_detected_and_judged_right(case):
    """Each servable fixture is read as its producer's layout; under every profile whose engine loads it there is
    no error but the true ones listed above; every profile whose engine cannot load it gets an error naming it."""
    from eaglehub.profiles import read

    producer = case.split("/")[0]
    path = fixture(case)
    assert report(path)["layout"] == producer
    rep = report(path, deep=True)
    errors = [f for f in rep["findings"] if f["severity"] == "error"]
    for pid in ALL_PROFILES:
        loads = read(path, pid).loads
        named = [f["code"] for f in errors if pid in f.get("profiles", [])]
        if loads:
            assert not named, (pid, named)
        else:  # an error naming no profile holds for all of them
            assert named or [f for f in errors if not f.get("profiles")], f"{case}: {pid} fails, no error says so"
    plain = {f["code"] for f in errors if not f.get("profiles")}
    assert plain == TRUE_ERRORS.get(case, set()), plain


def test_an_engine_that_stops_at_the_config_is_one_finding():
    """SGLang has no speculators reader: one E-ENGINE-LOAD for it (not a missing class and a null
    target_hidden_size as well), none of the warnings about what it would do past that point, and a hint that
    converts to SGLang's layout only where that layout holds the drafter."""
    rep = report(fixture("speculators/train-eagle3-plain"))
    sglang = [f for f in rep["findings"] if "sglang-0.5.23" in f.get("profiles", [])]
    assert [(f["code"], f["subject"]) for f in sglang] == [("E-ENGINE-LOAD", "speculators_config")]
    assert "norm_before_residual" in sglang[0]["message"] and "--format specforge" not in sglang[0]["hint"]
    api = [f for f in report(fixture("speculators/api-eagle3"))["findings"] if "sglang-0.5.23" in f.get("profiles", [])]
    assert len(api) == 1 and api[0]["hint"].endswith("--format specforge")


def test_a_null_draft_vocab_size_is_one_finding_with_the_edit_that_works(tmp_path):
    """draft_vocab_size null in a speculators drafter with a 128-entry d2t: vLLM then sizes the head for the whole
    vocabulary and has no d2t parameter. The field at fault is named once (E-CONFIG-DIM, with the edit); no
    E-ENGINE-WEIGHT proposing to drop the trained maps. The hinted command writes a copy that validates."""
    src = tmp_path / "e3"
    shutil.copytree(fixture("speculators/api-eagle3"), src)
    cfg = json.loads((src / "config.json").read_text())
    cfg["draft_vocab_size"] = None
    (src / "config.json").write_text(json.dumps(cfg))
    found = report(src)["findings"]
    assert "E-ENGINE-WEIGHT" not in [f["code"] for f in found]
    (dim,) = [f for f in found if f["code"] == "E-CONFIG-DIM"]
    assert dim["hint"].endswith("--set draft_vocab_size=128")
    res = run_cli("convert", src, tmp_path / "e3-fixed", "--set", "draft_vocab_size=128")
    assert res.exit_code == 0, res.output
    errors = [
        f for f in report(tmp_path / "e3-fixed", profiles=("vllm-0.33-gpu",))["findings"] if f["severity"] == "error"
    ]
    assert errors == []
