"""Format conversion details: aux-id translation (docs/formats.md §3), ``--force`` provenance, sharded
output, ``.bin`` input, hub-cache sources, ambiguity, CLI — and the source is never touched.

Sources are written by formats_factory the way each producer writes them (never by eaglehub).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from helpers.formats_factory import (
    AUX_KEY,
    Spec,
    canonical_name,
    read_safetensors_dir,
    safetensors_metadata,
    same_tensor,
    source_guarded,
    tree_state,
    write_format,
)

from eaglehub.checks.validate import validate
from eaglehub.cli import main
from eaglehub.convert.run import convert as _convert
from eaglehub.drafter.spec import describe
from eaglehub.errors import EaglehubError
from eaglehub.formats.registry import read_drafter

convert = source_guarded(_convert)  # every conversion proves its source untouched (bytes and mtimes)


VERIFIER_ID = "tiny-org/tiny-target-8l"


def cfg_of(path: Path) -> dict:
    return json.loads((Path(path) / "config.json").read_text())


def canon(path: Path) -> dict:
    return {canonical_name("any", n): t for n, t in read_safetensors_dir(path).items()}


def assert_bit_identical(src, path: Path, skip: set[str] = frozenset()) -> dict:
    got = canon(path)
    for n, t in src.canonical.items():
        if n not in skip:
            assert n in got, f"{n} missing"
            assert same_tensor(got[n], t), f"{n} changed"
    return got


# --- aux ids (docs/formats.md §3) ----------------------------------------------------------------------


def test_specforge_nested_c_out_becomes_top_level_c_in_and_back(tmp_path):
    """The vLLM output gets the top-level C-in list vLLM reads and keeps SpecForge's nested list, which SGLang
    reads (as C-out: the same layers); back in SpecForge's layout the top-level list stays for vLLM."""
    src = write_format(tmp_path / "sf", "specforge", aux_c_in=(2, 4, 5))
    assert src.config["eagle_config"][AUX_KEY] == [1, 3, 4] and AUX_KEY not in src.config
    before = tree_state(src.path)
    d = read_drafter(src.path)
    assert d.format == "specforge" and d.aux.convention == "C-out" and d.aux.c_in == [2, 4, 5]

    convert(src.path, tmp_path / "v", fmt="vllm")
    v = cfg_of(tmp_path / "v")
    assert v[AUX_KEY] == [2, 4, 5] and v["num_aux_hidden_states"] == 3
    assert v["eagle_config"][AUX_KEY] == [1, 3, 4]  # SGLang's list, as stored: the same layers, C-out
    assert not [f for f in validate(tmp_path / "v")["findings"] if f["code"] == "W-AUX-CONFLICT"]
    dv = read_drafter(tmp_path / "v")
    assert dv.aux.convention == "C-in" and dv.aux.c_in == [2, 4, 5]

    convert(tmp_path / "v", tmp_path / "back", fmt="specforge")
    back = cfg_of(tmp_path / "back")
    assert back["eagle_config"][AUX_KEY] == [1, 3, 4] and back[AUX_KEY] == [2, 4, 5]
    assert {k: v for k, v in back.items() if k != AUX_KEY} == src.config
    assert read_drafter(tmp_path / "back").format == "specforge"
    assert tree_state(src.path) == before


@pytest.mark.parametrize("src_fmt", ["specforge", "torchspec", "modelopt"])
@pytest.mark.parametrize("dst_fmt", ["vllm", "speculators"])
def test_nested_c_out_lifted_plus_one(src_fmt, dst_fmt, tmp_path):
    src = write_format(tmp_path / "src", src_fmt, aux_c_in=(2, 5, 7))
    assert src.config["eagle_config"][AUX_KEY] == [1, 4, 6] and AUX_KEY not in src.config
    d = read_drafter(src.path)
    assert d.aux.convention == "C-out" and d.aux.c_in == [2, 5, 7]
    convert(src.path, tmp_path / "out", fmt=dst_fmt, verifier=VERIFIER_ID if dst_fmt == "speculators" else None)
    out = cfg_of(tmp_path / "out")
    assert out[AUX_KEY] == [2, 5, 7]
    # SGLang reads only the nested list: the vLLM layout keeps it as stored; SGLang cannot read speculators at all
    assert (out.get("eagle_config") or {}).get(AUX_KEY) == ([1, 4, 6] if dst_fmt == "vllm" else None)
    if dst_fmt == "vllm":
        assert out["num_aux_hidden_states"] == 3


def test_top_level_ids_moved_to_nested_minus_one(tmp_path):
    src = write_format(tmp_path / "spec", "speculators", aux_c_in=(2, 4, 5))
    for fmt in ("specforge", "torchspec", "modelopt"):
        convert(src.path, tmp_path / fmt, fmt=fmt)
        out = cfg_of(tmp_path / fmt)
        assert out["eagle_config"][AUX_KEY] == [1, 3, 4], fmt
        assert out[AUX_KEY] == [2, 4, 5], fmt  # kept for vLLM, which reads the nested list one layer early
        assert read_drafter(tmp_path / fmt).aux.c_in == [2, 4, 5]


def test_top_level_count_disagreeing_with_fc_is_an_error(tmp_path):
    """vLLM sizes fc from num_aux_hidden_states (else 3) and captures every listed id: 4 ids for an fc
    that reads 3 states is the speculators #1065 / vLLM #54526 trap (docs/formats.md §3)."""
    src = write_format(tmp_path / "src", "vllm")
    cfg = cfg_of(src.path)
    cfg[AUX_KEY] = [2, 4, 5, 7]
    del cfg["num_aux_hidden_states"]
    (src.path / "config.json").write_text(json.dumps(cfg))
    before = tree_state(src.path)
    res = validate(src.path)
    count = [f for f in res["findings"] if f["code"] == "E-AUX-COUNT"]
    assert count and "4" in count[0]["message"] and "3" in count[0]["message"], res["findings"]
    for fmt in ("speculators", "specforge", "vllm"):
        with pytest.raises(EaglehubError) as exc:
            convert(src.path, tmp_path / fmt, fmt=fmt, verifier=VERIFIER_ID)
        assert "E-AUX-COUNT" in str(exc.value) and exc.value.exit_code == 1
        assert not (tmp_path / fmt).exists()
    assert tree_state(src.path) == before

    spec = write_format(tmp_path / "spec", "speculators")  # speculators #1065 shape: 4 top-level ids, fc for 3
    cfg = cfg_of(spec.path)
    cfg[AUX_KEY] = [2, 46, 91, 93]
    (spec.path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(EaglehubError) as exc:
        convert(spec.path, tmp_path / "spec-out", fmt="vllm")
    assert "E-AUX-COUNT" in str(exc.value)
    assert not (tmp_path / "spec-out").exists()


def test_unknown_convention_nested_list_is_reported(tmp_path):
    """A nested list that matches no rule (first id neither 1 nor 2, no target to compare N with)."""
    src = write_format(tmp_path / "sf", "specforge", aux_c_in=(4, 6, 7))
    assert src.config["eagle_config"][AUX_KEY] == [3, 5, 6]
    d = read_drafter(src.path)
    assert d.aux.raw == [3, 5, 6] and "rule" in d.aux.reason
    warn = [f for f in validate(src.path)["findings"] if f["code"] == "W-AUX-CONVENTION"]
    assert warn and "[3, 5, 6]" in warn[0]["message"]
    # SpecForge is a C-out producer: the assumption is recorded in the report and in eaglehub.json
    report = convert(src.path, tmp_path / "out", fmt="vllm")
    assert report["aux"]["source_convention"] == "C-out" and report["aux"]["c_in"] == [4, 6, 7]
    prov = json.loads((tmp_path / "out" / "eaglehub.json").read_text())
    assert prov["conversion"]["aux"]["source_convention"] == "C-out"
    assert cfg_of(tmp_path / "out")[AUX_KEY] == [4, 6, 7]

    # --from cannot recast it as a format with no convention of its own (that would change the model)
    with pytest.raises(EaglehubError, match="contradicts the evidence") as exc:
        convert(src.path, tmp_path / "v", fmt="vllm", source_format="vllm")
    assert exc.value.exit_code == 2 and not (tmp_path / "v").exists()
    # naming the convention settles it either way, with the assumption gone from the warnings
    report = convert(src.path, tmp_path / "v", fmt="vllm", aux_convention="c-in")
    assert cfg_of(tmp_path / "v")[AUX_KEY] == [3, 5, 6] and not any("aux-layer ids" in w for w in report["warnings"])
    res = CliRunner().invoke(
        main,
        ["convert", str(src.path), str(tmp_path / "v2"), "--format", "vllm", "--aux-convention", "c-out"],
    )
    assert res.exit_code == 0, res.output
    assert cfg_of(tmp_path / "v2")[AUX_KEY] == [4, 6, 7]


# --- force and provenance ---------------------------------------------------------------------


def test_cannot_express_then_force_records_drops(tmp_path):
    src = write_format(tmp_path / "src", "vllm", embed=True, fc_norm=True, norm_output=True)
    before = tree_state(src.path)
    with pytest.raises(EaglehubError) as exc:
        convert(src.path, tmp_path / "mo", fmt="modelopt")
    assert "cannot express" in str(exc.value) and exc.value.exit_code == 1
    assert "embed_tokens" in str(exc.value)
    assert not (tmp_path / "mo").exists()

    report = convert(src.path, tmp_path / "mo", fmt="modelopt", force=True)
    assert [t for drop in report["dropped"] for t in drop["tensors"]] == ["embed_tokens.weight"]
    prov = json.loads((tmp_path / "mo" / "eaglehub.json").read_text())
    assert prov["conversion"]["dropped"] == report["dropped"]
    assert prov["conversion"]["format"] == "modelopt" and prov["source"]["format"] == "vllm"
    assert Path(prov["source"]["path"]).resolve() == src.path.resolve()
    got = assert_bit_identical(src, tmp_path / "mo", skip={"embed_tokens.weight", "t2d"})
    assert "embed_tokens.weight" not in got and "t2d" not in got  # ModelOpt: d2t only
    assert read_drafter(tmp_path / "mo").format == "modelopt"
    assert tree_state(src.path) == before


def test_force_cannot_write_mla_into_a_llama_only_format(tmp_path):
    src = write_format(tmp_path / "src", "vllm", layer_kind="mla")
    for fmt in ("speculators", "specforge"):
        with pytest.raises(EaglehubError) as exc:
            convert(src.path, tmp_path / fmt, fmt=fmt)
        assert "cannot express" in str(exc.value)
        with pytest.raises(EaglehubError):
            convert(src.path, tmp_path / fmt, fmt=fmt, force=True)
        assert not (tmp_path / fmt).exists()


def test_provenance_file_and_metadata(tmp_path):
    src = write_format(tmp_path / "src", "specforge")
    convert(src.path, tmp_path / "out", fmt="speculators", verifier=VERIFIER_ID)
    prov = json.loads((tmp_path / "out" / "eaglehub.json").read_text())
    assert prov["schema"] == "eaglehub.provenance/1"
    import eaglehub

    assert prov["eaglehub_version"] == eaglehub.__version__
    assert prov["source"]["format"] == "specforge" and prov["source"]["version"] == "3"
    assert prov["conversion"]["format"] == "speculators" and prov["conversion"]["version"] == "3"
    assert prov["target"]["name_or_path"] == VERIFIER_ID
    assert cfg_of(tmp_path / "out")["speculators_config"]["verifier"]["name_or_path"] == VERIFIER_ID
    meta = safetensors_metadata(tmp_path / "out")
    eh = {k: v for k, v in meta.items() if k.startswith("eaglehub.")}
    assert eh and eh.get("eaglehub.version") == eaglehub.__version__
    assert "specforge" in json.dumps(eh) and "speculators" in json.dumps(eh)


def test_dst_exists_needs_overwrite(tmp_path):
    src = write_format(tmp_path / "src", "vllm")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("x")
    with pytest.raises(EaglehubError):
        convert(src.path, tmp_path / "out", fmt="speculators", verifier=VERIFIER_ID)
    assert (tmp_path / "out" / "keep.txt").read_text() == "x"
    convert(src.path, tmp_path / "out", fmt="speculators", overwrite=True, verifier=VERIFIER_ID)
    assert not (tmp_path / "out" / "keep.txt").exists()
    assert read_drafter(tmp_path / "out").format == "speculators"


# --- norm_before_residual, fc_norm width, upgrade -----------------------------------------------------


def test_speculators_absent_norm_before_residual_means_true(tmp_path):
    src = write_format(tmp_path / "spec", "speculators")
    cfg = cfg_of(src.path)
    del cfg["norm_before_residual"]
    (src.path / "config.json").write_text(json.dumps(cfg))
    d = read_drafter(src.path)
    assert d.config["norm_before_residual"] is True
    with pytest.raises(EaglehubError) as exc:
        convert(src.path, tmp_path / "sf", fmt="specforge")
    assert "cannot express" in str(exc.value) and "norm_before_residual" in str(exc.value)
    convert(src.path, tmp_path / "v", fmt="vllm")
    assert cfg_of(tmp_path / "v")["norm_before_residual"] is True  # vLLM's own default is false (docs/vllm.md §3)

    explicit = write_format(tmp_path / "spec2", "speculators")
    assert explicit.config["norm_before_residual"] is False
    convert(explicit.path, tmp_path / "sf2", fmt="specforge")
    assert cfg_of(tmp_path / "sf2").get("norm_before_residual", False) is False


def test_fc_norm_wider_than_hidden_cannot_be_speculators(tmp_path):
    src = write_format(tmp_path / "src", "vllm", fc_norm=True, embed=True, target_hidden=96)
    assert tuple(src.canonical["fc_norm.0.weight"].shape) == (96,) and tuple(src.canonical["fc.weight"].shape) == (
        64,
        288,
    )
    with pytest.raises(EaglehubError) as exc:
        convert(src.path, tmp_path / "s", fmt="speculators", verifier=VERIFIER_ID)
    assert "cannot express" in str(exc.value)
    report = convert(src.path, tmp_path / "s", fmt="speculators", force=True, verifier=VERIFIER_ID)
    dropped = {t for drop in report["dropped"] for t in drop["tensors"]}
    assert dropped == {"fc_norm.0.weight", "fc_norm.1.weight", "fc_norm.2.weight"}
    assert cfg_of(tmp_path / "s").get("fc_norm", False) is False  # no flag without its weights (F17)
    assert read_drafter(tmp_path / "s").format == "speculators"
    assert_bit_identical(src, tmp_path / "s", skip={f"fc_norm.{i}.weight" for i in range(3)})


def test_upgrade_while_changing_format(tmp_path):
    src = write_format(tmp_path / "src", "speculators", dtype="float16")
    report = convert(src.path, tmp_path / "v31", to="3.1", fmt="vllm")
    got = assert_bit_identical(src, tmp_path / "v31")
    for i in range(3):
        w = got[f"fc_norm.{i}.weight"]
        assert w.dtype == torch.float16 and tuple(w.shape) == (64,) and bool((w == 1).all())
    cfg = cfg_of(tmp_path / "v31")
    assert cfg["fc_norm"] is True and cfg["norm_output"] is True
    d = read_drafter(tmp_path / "v31")
    assert d.format == "vllm" and d.version == "3.1"
    assert json.loads((tmp_path / "v31" / "eaglehub.json").read_text())["conversion"]["version"] == "3.1"
    assert isinstance(report, dict)
    res = validate(tmp_path / "v31")
    assert res["ok"], res["findings"]


# --- files ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("limit", "limit_bytes"), [("10KB", 10_000), (20_000, 20_000)])
def test_sharded_output(limit, limit_bytes, tmp_path):
    src = write_format(tmp_path / "src", "vllm", fc_norm=True, norm_output=True, embed=True)
    convert(src.path, tmp_path / "out", fmt="speculators", max_shard_size=limit, verifier=VERIFIER_ID)
    out = tmp_path / "out"
    index = json.loads((out / "model.safetensors.index.json").read_text())
    files = sorted(set(index["weight_map"].values()))
    assert len(files) >= 2 and not (out / "model.safetensors").exists()
    assert sorted(p.name for p in out.glob("*.safetensors")) == files
    from safetensors import safe_open

    total = 0
    for f in files:
        with safe_open(str(out / f), framework="pt") as fh:
            keys = list(fh.keys())
            size = sum(fh.get_tensor(k).numel() * fh.get_tensor(k).element_size() for k in keys)
            assert all(index["weight_map"][k] == f for k in keys)
            assert any(k.startswith("eaglehub.") for k in (fh.metadata() or {}))
        total += size
        assert size <= limit_bytes or len(keys) == 1, (f, size, keys)
    assert index["metadata"]["total_size"] == total
    assert set(index["weight_map"]) == set(read_safetensors_dir(out))
    assert_bit_identical(src, out)
    d = read_drafter(out)
    assert d.format == "speculators" and set(d.tensors) == set(src.canonical)


def test_sharded_and_bin_inputs_convert_bit_exact(tmp_path):
    for kind in ("bin", "sharded"):
        src = write_format(
            tmp_path / f"src-{kind}", "vllm", research=True, dtype="float16", file_kind=kind, aux_c_in=None
        )
        before = tree_state(src.path)
        assert read_drafter(src.path).format == "vllm"
        for fmt in ("vllm", "speculators"):
            out = tmp_path / f"{kind}-{fmt}"
            convert(src.path, out, fmt=fmt, verifier=VERIFIER_ID if fmt == "speculators" else None)
            assert (out / "model.safetensors").is_file() and not (out / "pytorch_model.bin").exists()
            assert not (out / "model.safetensors.index.json").exists()
            got = assert_bit_identical(src, out)
            assert set(got) == set(src.canonical)
        assert tree_state(src.path) == before


def _blob(cache_repo: Path, data: bytes) -> str:
    h = hashlib.sha256(data).hexdigest()
    (cache_repo / "blobs").mkdir(parents=True, exist_ok=True)
    (cache_repo / "blobs" / h).write_bytes(data)
    return h


def make_hub_cache(cache: Path, repo_id: str, src_dir: Path, commit: str = "a" * 40, ref: str = "main") -> Path:
    """Lay ``src_dir``'s files out the way huggingface_hub caches a snapshot: content-addressed blobs,
    relative symlinks under ``snapshots/<commit>/``, ``refs/<ref>`` holding the commit."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True, exist_ok=True)
    for f in sorted(src_dir.iterdir()):
        h = _blob(repo, f.read_bytes())
        (snap / f.name).symlink_to(Path("..") / ".." / "blobs" / h)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / ref).write_text(commit)
    return snap


def test_hub_cache_source(tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    a = write_format(tmp_path / "a", "specforge", seed=1)
    b = write_format(tmp_path / "b", "specforge", seed=2, aux_c_in=(2, 5, 7))
    assert sorted(p.name for p in a.path.iterdir()) == [
        "config.json",
        "model.safetensors",
    ]  # only these needed
    make_hub_cache(cache, "tiny-org/eagle3-drafter", a.path, commit="a" * 40, ref="main")
    make_hub_cache(cache, "tiny-org/eagle3-drafter", b.path, commit="b" * 40, ref="v2")
    before = tree_state(cache)

    # a fresh process reads HF_HUB_CACHE / HF_HUB_OFFLINE from the environment, as a user's shell sets them
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    env.pop("HF_HOME", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "eaglehub.cli",
            "convert",
            "tiny-org/eagle3-drafter",
            str(tmp_path / "out"),
            "--format",
            "vllm",
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert_bit_identical(a, tmp_path / "out", skip={"t2d"})
    assert cfg_of(tmp_path / "out")[AUX_KEY] == [2, 4, 5]
    prov = json.loads((tmp_path / "out" / "eaglehub.json").read_text())
    assert prov["source"].get("repo_id") == "tiny-org/eagle3-drafter"
    assert prov["source"].get("revision") == "a" * 40
    assert "tiny-org/eagle3-drafter" in safetensors_metadata(tmp_path / "out")["eaglehub.source"]

    # in this process huggingface_hub may already have read its settings: set them where it reads them
    import huggingface_hub.constants as hf_constants

    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    runner = CliRunner()
    res = runner.invoke(
        main,
        [
            "convert",
            "tiny-org/eagle3-drafter",
            str(tmp_path / "out2"),
            "--format",
            "vllm",
            "--revision",
            "v2",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    assert cfg_of(tmp_path / "out2")[AUX_KEY] == [2, 5, 7]
    assert_bit_identical(b, tmp_path / "out2", skip={"t2d"})
    assert json.loads((tmp_path / "out2" / "eaglehub.json").read_text())["source"]["revision"] == "b" * 40
    convert("tiny-org/eagle3-drafter", tmp_path / "out3", fmt="torchspec", revision="a" * 40)
    assert_bit_identical(a, tmp_path / "out3", skip={"t2d", "d2t"})
    assert tree_state(cache) == before

    # a sharded repo: the index and every shard it names come from the cache, nothing else
    c = write_format(tmp_path / "c", "speculators", file_kind="sharded", seed=3)
    assert sorted(p.name for p in c.path.iterdir()) == [
        "config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
    ]
    make_hub_cache(cache, "tiny-org/sharded-drafter", c.path, commit="c" * 40)
    convert("tiny-org/sharded-drafter", tmp_path / "out5", fmt="vllm")
    assert set(canon(tmp_path / "out5")) == set(c.canonical) and assert_bit_identical(c, tmp_path / "out5")

    res = runner.invoke(main, ["convert", "tiny-org/not-cached", str(tmp_path / "out4"), "--format", "vllm"])
    assert res.exit_code == 2 and "cache" in res.output and not (tmp_path / "out4").exists()


# --- ambiguity -----------------------------------------------------------------------------------


def unmarked_layers0(tmp_path) -> Path:
    """``LlamaForCausalLMEagle3`` + ``layers.0.*`` + nested ids + no ``t2d`` + no marker: a TorchSpec
    export without ``_torchspec_version`` and a ModelOpt export without ``next_layer_regular`` look alike."""
    w = write_format(tmp_path / "amb", "torchspec", pruned=False)
    cfg = cfg_of(w.path)
    del cfg["_torchspec_version"]
    (w.path / "config.json").write_text(json.dumps(cfg))
    assert "t2d" not in w.stored and "layers.0.self_attn.q_proj.weight" in w.stored
    return w.path


def test_ambiguous_input_is_an_error_until_the_format_is_given(tmp_path):
    src = unmarked_layers0(tmp_path)
    before = tree_state(src)
    with pytest.raises(EaglehubError) as exc:
        read_drafter(src)
    msg = str(exc.value)
    assert "ambiguous" in msg and "torchspec" in msg and "modelopt" in msg
    with pytest.raises(EaglehubError):
        convert(src, tmp_path / "x", fmt="vllm")
    assert read_drafter(src, fmt="modelopt").format == "modelopt"
    assert read_drafter(src, fmt="torchspec").format == "torchspec"
    report = convert(src, tmp_path / "v", fmt="vllm", source_format="modelopt")
    assert report and read_drafter(tmp_path / "v").format == "vllm"
    assert cfg_of(tmp_path / "v")[AUX_KEY] == [2, 4, 5]
    assert tree_state(src) == before


# --- CLI -----------------------------------------------------------------------------------------


def test_cli_convert_inspect_validate(tmp_path):
    src = write_format(tmp_path / "src", "torchspec", embed=True, fc_norm=True)
    before = tree_state(src.path)
    runner = CliRunner()
    res = runner.invoke(main, ["inspect", str(src.path), "--json"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    assert (
        rep["format"] == "torchspec"
        and rep["format_evidence"]
        and all(isinstance(e, str) for e in rep["format_evidence"])
    )

    res = runner.invoke(main, ["convert", str(src.path), str(tmp_path / "v"), "--format", "vllm", "--json"])
    assert res.exit_code == 0, res.output
    assert isinstance(json.loads(res.stdout), dict)
    res = runner.invoke(main, ["validate", str(tmp_path / "v")])
    assert res.exit_code == 0, res.output
    rep = json.loads(runner.invoke(main, ["inspect", str(tmp_path / "v"), "--json"]).output)
    assert rep["format"] == "vllm"

    res = runner.invoke(main, ["convert", str(src.path), str(tmp_path / "mo"), "--format", "modelopt"])
    assert res.exit_code == 1 and "cannot express" in res.output and not (tmp_path / "mo").exists()
    res = runner.invoke(
        main, ["convert", str(src.path), str(tmp_path / "mo"), "--format", "modelopt", "--force", "--json"]
    )
    assert res.exit_code == 0, res.output
    dropped = json.loads(res.stdout)["dropped"]
    assert [t for drop in dropped for t in drop["tensors"]] == ["embed_tokens.weight"]

    amb = unmarked_layers0(tmp_path)
    res = runner.invoke(main, ["inspect", str(amb), "--json"])
    assert res.exit_code != 0 and "ambiguous" in res.output
    res = runner.invoke(main, ["inspect", str(amb), "--from", "modelopt", "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["format"] == "modelopt"
    res = runner.invoke(main, ["convert", str(amb), str(tmp_path / "amb-v"), "--from", "torchspec", "--format", "vllm"])
    assert res.exit_code == 0, res.output
    assert tree_state(src.path) == before


# --- describe -----------------------------------------------------------------------------------


def test_describe_is_json_and_tracks_equivalence(tmp_path):
    spec = Spec(fc_norm=True, seed=5)
    one = write_format(tmp_path / "one", "vllm", spec=spec)
    shards = write_format(tmp_path / "shards", "vllm", spec=spec, file_kind="sharded")
    desc = describe(read_drafter(one.path))
    assert json.loads(json.dumps(desc)) == desc
    assert describe(read_drafter(shards.path)) == desc  # same drafter, other files
    other_ids = write_format(tmp_path / "ids", "vllm", spec=Spec(fc_norm=True, seed=5, aux_c_in=(2, 4, 6)))
    assert describe(read_drafter(other_ids.path)) != desc
    other_flag = write_format(tmp_path / "flag", "vllm", spec=Spec(fc_norm=True, norm_output=True, seed=5))
    assert describe(read_drafter(other_flag.path)) != desc
    assert desc["version"] == "3.1" and desc["layer_kind"] == "llama" and desc["aux_layer_ids"] == [2, 4, 5]
    assert desc["flags"]["fc_norm"] is True and desc["flags"]["norm_output"] is False
    assert desc["dtype"] == "bfloat16" and desc["num_aux_hidden_states"] == 3 and desc["target_hidden_size"] == 64
    assert desc["tensors"]["fc.weight"] == ["bfloat16", [64, 192]]
    assert desc["tensors"]["fc_norm.2.weight"] == ["bfloat16", [64]]
    assert desc["config"]["rope_scaling"] == one.config["rope_scaling"]


# --- flags where engines read them (F16, F17) ----------------------------------------------------


def test_nested_norm_before_fc_reaches_every_format(tmp_path):
    """``norm_before_fc`` only inside ``eagle_config`` (ModelOpt gpt-oss drafters; vLLM: nested wins,
    docs/vllm.md §3): the flag must land where each target format's engine reads it, with ``input_norm``."""
    src = write_format(tmp_path / "mo", "modelopt", norm_before_fc=True)
    cfg = cfg_of(src.path)
    del cfg["norm_before_fc"]
    cfg["eagle_config"]["norm_before_fc"] = True
    (src.path / "config.json").write_text(json.dumps(cfg))
    d = read_drafter(src.path)
    assert d.format == "modelopt" and d.flags.norm_before_fc is True
    convert(src.path, tmp_path / "s", fmt="speculators", verifier=VERIFIER_ID)
    assert cfg_of(tmp_path / "s")["norm_before_fc"] is True  # speculators reads the top level only (F16)
    convert(src.path, tmp_path / "v", fmt="vllm")
    assert read_drafter(tmp_path / "v").flags.norm_before_fc is True
    assert validate(tmp_path / "v")["ok"]
    for out in ("s", "v"):
        got = assert_bit_identical(src, tmp_path / out, skip={"t2d"})
        assert tuple(got["input_norm.weight"].shape) == (192,)
    with pytest.raises(EaglehubError) as exc:
        convert(src.path, tmp_path / "sf", fmt="specforge")
    assert "cannot express" in str(exc.value) and "norm_before_fc" in str(exc.value)


def test_speculators_31_flags_reach_vllm_top_level(tmp_path):
    """F17: EAGLE-3.1 flags of a speculators drafter become top-level vLLM flags, weights kept."""
    src = write_format(tmp_path / "s", "speculators", fc_norm=True, norm_output=True, embed=True)
    convert(src.path, tmp_path / "v", fmt="vllm")
    cfg = cfg_of(tmp_path / "v")
    assert cfg["fc_norm"] is True and cfg["norm_output"] is True
    got = assert_bit_identical(src, tmp_path / "v")
    assert {f"fc_norm.{i}.weight" for i in range(3)} <= set(got)
    assert validate(tmp_path / "v")["ok"]


def test_upgrade_of_a_31_drafter_is_refused(tmp_path):
    src = write_format(tmp_path / "src", "torchspec", fc_norm=True)
    with pytest.raises(EaglehubError) as exc:
        convert(src.path, tmp_path / "out", to="3.1", fmt="vllm")
    assert "3.1" in str(exc.value)
    assert not (tmp_path / "out").exists()


# --- failure kinds (docs/failure-kinds.md) --------------------------------------------------------------


def test_f1_target_class_in_drafter_config_is_fixed_by_convert(tmp_path):
    """F1: a drafter that declares the target's class (``Qwen3ForCausalLM``, ``model_type qwen3``) with
    ``midlayer.*`` names. validate names the problem; "convert fixes the class"."""
    src = write_format(
        tmp_path / "src",
        "specforge",
        base_config={"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"},
    )
    res = validate(src.path)
    assert not res["ok"] and "E-CONFIG-ARCH" in {f["code"] for f in res["findings"]}
    report = convert(src.path, tmp_path / "v", fmt="vllm", source_format="specforge")
    changed = {c["key"]: (c["old"], c["new"]) for c in report["config_changes"]}
    assert changed == {
        "architectures": (["Qwen3ForCausalLM"], ["LlamaForCausalLMEagle3"]),
        "model_type": ("qwen3", "llama"),
    }
    cfg = cfg_of(tmp_path / "v")
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"] and cfg["model_type"] == "llama"
    assert validate(tmp_path / "v")["ok"]
    assert_bit_identical(src, tmp_path / "v", skip={"t2d"})


@pytest.mark.parametrize("breakage", ["missing-tensor", "unexpected-tensor", "pruned-without-d2t"])
def test_f2_f6_broken_sources_are_refused(breakage, tmp_path):
    """F2: missing/unexpected keys are errors, never silently filled or dropped; F6: a pruned vocabulary
    without ``d2t``. Nothing is written."""
    src = write_format(tmp_path / "src", "specforge")
    from safetensors.torch import save_file

    tensors = dict(src.stored)
    if breakage == "missing-tensor":
        del tensors["midlayer.mlp.up_proj.weight"]
    elif breakage == "unexpected-tensor":
        tensors["midlayer.self_attn.qkv_proj.weight"] = torch.zeros(4, 4, dtype=torch.bfloat16)
    else:
        del tensors["d2t"], tensors["t2d"]
    save_file(tensors, str(src.path / "model.safetensors"), metadata={"format": "pt"})
    before = tree_state(src.path)
    for fmt in ("vllm", "speculators", "modelopt"):
        with pytest.raises(EaglehubError) as exc:
            convert(src.path, tmp_path / fmt, fmt=fmt, source_format="specforge", verifier=VERIFIER_ID, force=True)
        assert exc.value.exit_code == 1
        assert not (tmp_path / fmt).exists()
    assert tree_state(src.path) == before


def test_f10_undeclared_target_hidden_size_is_written(tmp_path):
    """F10: ``fc [64, 288]`` with no ``target_hidden_size``: Ht = 288 / 3 = 96 is inferred and "convert
    writes it" (every engine would otherwise size aux buffers from hidden_size 64)."""
    src = write_format(tmp_path / "src", "specforge", embed=True, target_hidden=96)
    cfg = cfg_of(src.path)
    del cfg["target_hidden_size"]
    (src.path / "config.json").write_text(json.dumps(cfg))
    res = validate(src.path)
    assert not res["ok"] and "E-HIDDEN-UNDECLARED" in {f["code"] for f in res["findings"]}
    report = convert(src.path, tmp_path / "v", fmt="vllm", source_format="specforge")
    assert [(c["key"], c["old"], c["new"]) for c in report["config_changes"]] == [("target_hidden_size", None, 96)]
    assert cfg_of(tmp_path / "v")["target_hidden_size"] == 96
    assert validate(tmp_path / "v")["ok"]


def test_f14_rope_parameters_survive_every_format(tmp_path):
    """F14: transformers-5 ``rope_parameters`` (no ``rope_theta``/``rope_scaling``) kept verbatim everywhere."""
    rope = {
        "rope_type": "yarn",
        "rope_theta": 1000000.0,
        "factor": 4.0,
        "original_max_position_embeddings": 32768,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
    }
    src = write_format(tmp_path / "src", "vllm", fc_norm=True)
    cfg = cfg_of(src.path)
    del cfg["rope_theta"], cfg["rope_scaling"]
    cfg["rope_parameters"] = rope
    (src.path / "config.json").write_text(json.dumps(cfg))
    for fmt in ("speculators", "specforge", "torchspec", "modelopt"):
        convert(src.path, tmp_path / fmt, fmt=fmt, verifier=VERIFIER_ID if fmt == "speculators" else None)
        out = cfg_of(tmp_path / fmt)
        flat = {**out.get("transformer_layer_config", {}), **out}
        assert flat["rope_parameters"] == rope, fmt
        assert "rope_theta" not in flat and "rope_scaling" not in flat, fmt
        convert(tmp_path / fmt, tmp_path / f"{fmt}-back", fmt="vllm")
        back = cfg_of(tmp_path / f"{fmt}-back")
        if fmt != "speculators":  # the nested list SGLang reads in the SGLang-read layouts stays
            assert back.pop("eagle_config") == {AUX_KEY: [i - 1 for i in cfg[AUX_KEY]]}, fmt
        assert back == cfg, fmt


def test_cli_max_shard_size_and_overwrite(tmp_path):
    src = write_format(tmp_path / "src", "modelopt", fc_norm=True)
    runner = CliRunner()
    args = [
        "convert",
        str(src.path),
        str(tmp_path / "out"),
        "--format",
        "torchspec",
        "--max-shard-size",
        "10KB",
        "--json",
    ]
    res = runner.invoke(main, args)
    assert res.exit_code == 0, res.output
    index = json.loads((tmp_path / "out" / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) >= 2
    assert set(json.loads(res.stdout)["files"]) >= set(index["weight_map"].values())
    res = runner.invoke(main, args)
    assert res.exit_code == 2 and "exists" in res.output
    res = runner.invoke(main, [*args[:-1], "--overwrite"])
    assert res.exit_code == 0, res.output
    assert read_drafter(tmp_path / "out").format == "torchspec"
    assert_bit_identical(src, tmp_path / "out")


@pytest.mark.parametrize("src_fmt", ["speculators", "specforge", "torchspec", "modelopt"])
def test_vllm_output_states_the_aux_count(src_fmt, tmp_path):
    """vLLM-native output: top-level C-in ids **and** ``num_aux_hidden_states`` (docs/formats.md §7 "any → vLLM
    native", docs/vllm.md §7 and §14: vLLM sizes fc from the count, never from the top-level list)."""
    src = write_format(tmp_path / "src", src_fmt, aux_c_in=(2, 4, 5))
    convert(src.path, tmp_path / "v", fmt="vllm")
    cfg = cfg_of(tmp_path / "v")
    assert cfg[AUX_KEY] == [2, 4, 5]
    assert cfg.get("num_aux_hidden_states") == 3
