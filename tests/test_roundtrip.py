"""Round trips between every pair of formats (docs/formats.md §5, §7; the conversion contract).

For a drafter that formats A and B can both express, A → B → A returns exactly A's tensors (names,
dtypes, shapes, bytes) and the same canonical description (``eaglehub.drafter.spec.describe``). For a pair
where B cannot express the drafter, converting raises "cannot express" (exit 1) and ``force=True``
writes it anyway, recording the drops in the report and in DST/eaglehub.json. Sources are written
by formats_factory the way each producer writes them, never by eaglehub.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import torch
from helpers.formats_factory import (
    AUX_KEY,
    EXPORTED0,
    FATAL,
    FORMATS,
    LAYER0,
    Spec,
    cannot_express,
    canonical_name,
    read_safetensors_dir,
    same_tensor,
    source_guarded,
    tree_state,
    write_format,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eaglehub.checks.validate import validate
from eaglehub.convert.run import convert as _convert
from eaglehub.drafter.spec import describe
from eaglehub.errors import EaglehubError
from eaglehub.formats.registry import read_drafter

convert = source_guarded(_convert)  # every conversion proves its source untouched (bytes and mtimes)

#: layer-0 spelling each producer writes (docs/formats.md §5 "layer names")
LAYER0_OF = {
    "vllm": LAYER0,
    "specforge": LAYER0,
    "speculators": EXPORTED0,
    "torchspec": EXPORTED0,
    "modelopt": EXPORTED0,
}


VERIFIER_ID = "tiny-org/tiny-target-8l"


def convert_to(src_path: Path, dst: Path, fmt_b: str, src_has_target: bool, **kw) -> dict:
    """convert; a speculators config names its verifier, so one is given when the source has none."""
    if fmt_b == "speculators" and not src_has_target:
        kw["verifier"] = VERIFIER_ID
    return convert(src_path, dst, fmt=fmt_b, **kw)


def expected_maps(fmt: str, pruned: bool, src_maps: set[str]) -> set[str]:
    """Vocabulary maps a format writes (docs/formats.md §2 and §5 table)."""
    return {
        "vllm": ({"d2t"} | ({"t2d"} & src_maps)) if pruned else set(),  # d2t iff Vd < V; t2d optional
        "speculators": {"d2t", "t2d"} if pruned else set(),  # both iff Vd != V
        "specforge": {"d2t", "t2d"} if pruned else set(),  # both iff Vd < V: vLLM refuses an identity d2t
        "torchspec": {"d2t", "t2d"} if pruned else set(),  # only with --prune-vocab
        "modelopt": {"d2t"} if pruned else set(),  # d2t only
    }[fmt]


def out_canonical(path: Path) -> dict:
    """The converted checkpoint's tensors by canonical name, read with the safetensors library."""
    stored = read_safetensors_dir(path)
    out = {canonical_name("any", n): t for n, t in stored.items()}
    assert len(out) == len(stored)
    return out


def check_intermediate(src, b_dir: Path, fmt_b: str) -> None:
    """A → B: B is detected as B, spells layer 0 as B's producer does, ships B's maps, and every
    non-derivable tensor is bit-identical."""
    d = read_drafter(b_dir)
    assert d.format == fmt_b, d.evidence
    stored = read_safetensors_dir(b_dir)
    layers0 = {LAYER0 if n.startswith(LAYER0) else EXPORTED0 for n in stored if n.startswith((LAYER0, EXPORTED0))}
    assert layers0 == {LAYER0_OF[fmt_b]}, layers0
    c_in = list(src.spec.aux_c_in) if src.spec.aux_c_in else None
    assert d.aux.c_in == c_in
    cfg = json.loads((b_dir / "config.json").read_text())
    nested = cfg.get("eagle_config") if isinstance(cfg.get("eagle_config"), dict) else {}
    # besides its own list, B keeps the list A stored for the other engines, as A stored it (vLLM reads the
    # top-level list, SGLang the nested one): every engine reads the layers it read from A
    src_nested = (
        src.config.get("eagle_config", {}).get(AUX_KEY) if isinstance(src.config.get("eagle_config"), dict) else None
    )
    if fmt_b in ("vllm", "speculators"):  # top-level C-in
        assert cfg.get(AUX_KEY) == c_in
        assert nested.get(AUX_KEY) == (src_nested if fmt_b == "vllm" and c_in else None)
    else:  # nested C-out
        assert nested.get(AUX_KEY) == ([i - 1 for i in c_in] if c_in else None)
        assert cfg.get(AUX_KEY) == (c_in if AUX_KEY in src.config else None)
    got = out_canonical(b_dir)
    pruned = src.spec.pruned
    maps = {"d2t", "t2d"}
    assert set(got) & maps == expected_maps(fmt_b, pruned, set(src.canonical) & maps)
    assert set(got) - maps == set(src.canonical) - maps
    for n, t in src.canonical.items():
        if n in got and (n not in maps or pruned):
            assert same_tensor(got[n], t), f"{n} changed in {src.fmt} -> {fmt_b}"
    check_config(src, cfg, fmt_b)
    if fmt_b == "vllm":
        res = validate(b_dir)
        assert res["ok"], [f for f in res["findings"] if f["severity"] == "error"]
    if pruned and "t2d" in got and "t2d" not in src.canonical:  # synthesised from d2t (docs/formats.md §7)
        ids = torch.arange(len(got["d2t"])) + got["d2t"]
        assert got["t2d"].dtype == torch.bool and tuple(got["t2d"].shape) == (src.spec.dims.V,)
        assert int(got["t2d"].sum()) == len(ids)
        assert bool(got["t2d"][ids].all())


def check_config(src, cfg: dict, fmt_b: str) -> None:
    """What each producer's config must say (docs/formats.md §5, contract)."""
    spec, d = src.spec, src.spec.dims
    flags = {
        "fc_norm": spec.fc_norm,
        "norm_output": spec.norm_output,
        "norm_before_fc": spec.norm_before_fc,
        "norm_before_residual": spec.norm_before_residual,
    }
    if fmt_b == "speculators":
        layer = cfg["transformer_layer_config"]
        assert cfg["speculators_model_type"] == "eagle3" and "model_type" not in cfg
        assert layer["vocab_size"] == d.V and layer["hidden_size"] == d.H and layer["num_hidden_layers"] == d.layers
        assert cfg["draft_vocab_size"] == d.Vd
        assert cfg["norm_before_residual"] is spec.norm_before_residual  # explicit: absent would mean true
        assert cfg["speculators_config"]["verifier"]["name_or_path"]
        assert cfg["speculators_config"]["proposal_methods"][0]["speculative_tokens"] >= 1
        flat = {**layer, **cfg}
    else:
        flat = cfg
        assert cfg["hidden_size"] == d.H and cfg["vocab_size"] == d.V and cfg.get("draft_vocab_size", d.V) == d.Vd
        assert cfg.get("num_hidden_layers", 1) == d.layers
        want = "Eagle3DeepseekV2ForCausalLM" if spec.layer_kind == "mla" else "LlamaForCausalLMEagle3"
        assert cfg["architectures"] == [want]
        if d.Ht != d.H:
            assert cfg["target_hidden_size"] == d.Ht
    for k, v in flags.items():
        if k == "fc_norm" and flat.get("use_aux_norm") is True:
            continue
        assert flat.get(k, False) is v, k
    for k in (
        "rope_theta",
        "rope_scaling",
        "max_position_embeddings",
        "bos_token_id",
        "eos_token_id",
        "rms_norm_eps",
    ):
        assert flat[k] == src.config.get(k, src.config.get("transformer_layer_config", {}).get(k)), k


def check_round_trip(src, back: Path, via: str | None = None) -> None:
    got = out_canonical(back)
    assert set(got) == set(src.canonical)
    for n, t in src.canonical.items():
        assert same_tensor(got[n], t), f"{n} not bit-identical after the round trip"
    if src.fmt != "torchspec" or not any(n.startswith("aux_norm_") for n in src.stored):
        assert set(read_safetensors_dir(back)) == set(src.stored)  # the very same stored names
    want, have = describe(read_drafter(src.path)), describe(read_drafter(back))
    if via == "speculators" and src.fmt != "speculators":
        # the verifier named on the way (--verifier) is kept: the only thing the trip may add
        assert want["target"] is None and (have["target"] or {}).get("name_or_path") == VERIFIER_ID
        want, have = {**want, "target": None}, {**have, "target": None}
    assert have == want


def check_cannot_express(src, fmt_b: str, why: list[str], work: Path) -> None:
    dst = work / f"{src.fmt}-to-{fmt_b}"
    has_target = src.fmt == "speculators"
    with pytest.raises(EaglehubError) as exc:
        convert_to(src.path, dst, fmt_b, has_target)
    assert "cannot express" in str(exc.value), str(exc.value)
    assert exc.value.exit_code == 1
    assert not dst.exists()
    forced = work / f"{src.fmt}-to-{fmt_b}-forced"
    if FATAL & set(why):  # an MLA layer in a Llama-only format; a required embedding dropped: not even forced
        with pytest.raises(EaglehubError) as exc:
            convert_to(src.path, forced, fmt_b, has_target, force=True)
        assert "cannot express" in str(exc.value), str(exc.value)
        assert not forced.exists()
        return
    report = convert_to(src.path, forced, fmt_b, has_target, force=True)
    dropped = report["dropped"]
    assert dropped, report
    prov = json.loads((forced / "eaglehub.json").read_text())
    assert prov["conversion"]["dropped"] == dropped
    assert read_drafter(forced).format == fmt_b
    got = out_canonical(forced)
    text = json.dumps(dropped)
    dropped_tensors = {t for drop in dropped for t in drop["tensors"]}
    assert not dropped_tensors & set(got)
    if "embed_tokens" in why:
        assert "embed_tokens.weight" in dropped_tensors
    if "layers" in why:
        assert {n for n in src.canonical if n.startswith("layers.1.")} <= dropped_tensors
    if "norm_before_fc" in why or "both_norms" in why:
        assert "input_norm.weight" in dropped_tensors
    if "norm_before_residual" in why:
        assert "norm_before_residual" in text
    if "fc_norm_ht" in why:
        assert "fc_norm" in text
    # what was not dropped is still bit-identical
    for n, t in src.canonical.items():
        if n in got and n not in ("d2t", "t2d"):
            assert same_tensor(got[n], t), n


def run_all_pairs(spec: Spec, fmt_a: str, work: Path, file_kind: str = "safetensors", **kw) -> None:
    src = write_format(work / f"src-{fmt_a}", fmt_a, spec=spec, file_kind=file_kind, **kw)
    before = tree_state(src.path)
    for fmt_b in FORMATS:
        if fmt_b == fmt_a:
            continue
        why = cannot_express(fmt_b, spec)
        if why:
            check_cannot_express(src, fmt_b, why, work)
            continue
        b_dir, back = work / f"{fmt_a}-to-{fmt_b}", work / f"{fmt_a}-to-{fmt_b}-to-{fmt_a}"
        convert_to(src.path, b_dir, fmt_b, fmt_a == "speculators")
        check_intermediate(src, b_dir, fmt_b)
        b_state = tree_state(b_dir)
        convert(b_dir, back, fmt=fmt_a)
        assert tree_state(b_dir) == b_state
        check_round_trip(src, back, via=fmt_b)
    assert tree_state(src.path) == before


# --- every ordered pair, one rich drafter each --------------------------------------------------


def richest(fmt_a: str, fmt_b: str) -> Spec:
    """The most featureful drafter both formats can express."""
    for spec in (
        Spec(fc_norm=True, norm_output=True, embed=True, seed=3),
        Spec(fc_norm=True, norm_output=True, seed=3),
    ):
        if not cannot_express(fmt_a, spec) and not cannot_express(fmt_b, spec):
            return spec
    raise AssertionError


PAIRS = [(a, b) for a in FORMATS for b in FORMATS if a != b]


@pytest.mark.parametrize(("fmt_a", "fmt_b"), PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_pair_round_trip(fmt_a, fmt_b, tmp_path):
    spec = richest(fmt_a, fmt_b)
    src = write_format(tmp_path / "src", fmt_a, spec=spec)
    before = tree_state(src.path)
    convert_to(src.path, tmp_path / "b", fmt_b, fmt_a == "speculators")
    check_intermediate(src, tmp_path / "b", fmt_b)
    # a lossless conversion is an equivalent checkpoint: same canonical description
    want, have = describe(read_drafter(src.path)), describe(read_drafter(tmp_path / "b"))
    if fmt_b == "speculators" and fmt_a != "speculators":
        assert have["target"]["name_or_path"] == VERIFIER_ID
        want, have = {**want, "target": None}, {**have, "target": None}
    assert have == want
    convert(tmp_path / "b", tmp_path / "back", fmt=fmt_a)
    check_round_trip(src, tmp_path / "back", via=fmt_b)
    assert tree_state(src.path) == before


# --- generated drafters --------------------------------------------------------------------------


@st.composite
def drafters(draw):
    kind = draw(st.sampled_from(["llama", "llama", "mla"]))
    mla = kind == "mla"
    embed = draw(st.booleans())
    spec = Spec(
        layer_kind=kind,
        layers=1 if mla else draw(st.integers(1, 2)),
        fc_norm=draw(st.booleans()),
        norm_output=draw(st.booleans()),
        norm_before_fc=False
        if mla
        else draw(st.booleans()),  # vLLM's MLA drafter has no norm_before_fc (docs/vllm.md §5)
        norm_before_residual=False if mla else draw(st.booleans()),
        pruned=draw(st.booleans()),
        embed=embed,
        aux_c_in=draw(st.sampled_from([(2, 4, 5), (2, 5, 7), None])),
        dtype=draw(st.sampled_from(["bfloat16", "float16", "float32"])),
        seed=draw(st.integers(0, 1000)),
        target_hidden=draw(st.sampled_from([64, 96])) if embed and not mla else 64,
    )
    fmts = [f for f in FORMATS if not cannot_express(f, spec)]
    if not fmts:  # e.g. nothing but vllm/speculators hold norm_before_residual; keep at least one
        spec = Spec(**{**spec.__dict__, "norm_before_residual": False})
        fmts = [f for f in FORMATS if not cannot_express(f, spec)]
    fmt_a = draw(st.sampled_from(fmts))
    file_kind = draw(st.sampled_from(["safetensors", "safetensors", "bin", "sharded"]))
    return spec, fmt_a, file_kind


@pytest.mark.slow
@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(drafters())
def test_generated_round_trips(case):
    spec, fmt_a, file_kind = case
    with tempfile.TemporaryDirectory() as tmp:
        run_all_pairs(spec, fmt_a, Path(tmp), file_kind=file_kind)


def test_generated_space_reaches_every_format_and_refusal():
    """The strategy above can produce every source format and every reason a format refuses."""
    reasons, sources = set(), set()
    for spec in (
        Spec(layer_kind="mla"),
        Spec(layers=2),
        Spec(norm_before_fc=True),
        Spec(embed=True),
        Spec(norm_before_residual=True),
        Spec(fc_norm=True, embed=True, target_hidden=96),
        Spec(fc_norm=True, norm_before_fc=True),
    ):
        for f in FORMATS:
            reasons.update(cannot_express(f, spec))
            if not cannot_express(f, spec):
                sources.add(f)
    assert reasons == {
        "mla",
        "layers",
        "norm_before_fc",
        "embed_tokens",
        "embed_required",
        "norm_before_residual",
        "fc_norm_ht",
        "both_norms",
    }
    assert sources == set(FORMATS)


def test_torchspec_legacy_aux_norm_round_trip(tmp_path):
    """TorchSpec's older spelling (``use_aux_norm`` + ``aux_norm_{low,mid,high}``) reads as fc_norm. Only SGLang
    reads that spelling (its loader renames the names, L338-348; vLLM's refuses them and reads only ``fc_norm``),
    so every output, TorchSpec's layout too, stores ``fc_norm.{i}.weight`` and ``fc_norm`` (keeping
    ``use_aux_norm``): the same gains, now read by both engines."""
    src = write_format(tmp_path / "src", "torchspec", fc_norm=True, legacy_aux_norm=True, embed=True)
    assert "aux_norm_low.weight" in src.stored and "fc_norm" not in src.config and src.config["use_aux_norm"] is True
    d = read_drafter(src.path)
    assert d.format == "torchspec" and d.version == "3.1"
    assert {"fc_norm.0.weight", "fc_norm.1.weight", "fc_norm.2.weight"} <= set(d.tensors)
    convert(src.path, tmp_path / "v", fmt="vllm")
    cfg = json.loads((tmp_path / "v" / "config.json").read_text())
    assert cfg["fc_norm"] is True
    got = read_safetensors_dir(tmp_path / "v")
    for i, legacy in enumerate(("aux_norm_low.weight", "aux_norm_mid.weight", "aux_norm_high.weight")):
        assert same_tensor(got[f"fc_norm.{i}.weight"], src.stored[legacy])
    convert(tmp_path / "v", tmp_path / "back", fmt="torchspec")
    check_round_trip(src, tmp_path / "back")
    back = read_safetensors_dir(tmp_path / "back")
    renamed = {"aux_norm_low.weight": "fc_norm.0.weight", "aux_norm_mid.weight": "fc_norm.1.weight"}
    renamed["aux_norm_high.weight"] = "fc_norm.2.weight"
    assert set(back) == {renamed.get(n, n) for n in src.stored}
    cfg = json.loads((tmp_path / "back" / "config.json").read_text())
    assert cfg["fc_norm"] is True and cfg["use_aux_norm"] is True
    assert validate(src.path)["ok"] is False and validate(tmp_path / "back")["ok"], "vLLM loads only the output"


def test_specforge_output_without_aux_ids_is_detected_as_specforge(tmp_path):
    """What ``--format specforge`` writes must read back as specforge without ``--from``: SpecForge's
    ``midlayer.*`` + ``d2t`` + ``t2d`` + ``LlamaForCausalLMEagle3`` (docs/formats.md §6.3), even when the drafter
    has no explicit aux ids (most SpecForge configs have none: real-configs/specforge_*.json)."""
    src = write_format(tmp_path / "src", "vllm", aux_c_in=None, keep_t2d=False)
    convert(src.path, tmp_path / "sf", fmt="specforge")
    assert {"d2t", "t2d"} <= set(read_safetensors_dir(tmp_path / "sf"))
    assert read_drafter(tmp_path / "sf").format == "specforge"
    assert read_drafter(src.path).format == "vllm"  # no t2d: not SpecForge


def test_forced_drop_of_a_required_embedding_is_refused_as_cannot_express(tmp_path):
    """``H != Ht`` needs ``embed_tokens`` (F9), which ModelOpt cannot store: dropping it cannot give a
    working drafter, so ``--force`` must not help — refused up front as "cannot express", not as an
    internal "report this bug" after writing."""
    src = write_format(tmp_path / "src", "vllm", embed=True, target_hidden=96)
    with pytest.raises(EaglehubError) as exc:
        convert(src.path, tmp_path / "mo", fmt="modelopt", force=True)
    assert "cannot express" in str(exc.value) and "embed_tokens" in str(exc.value)
    assert "report this bug" not in str(exc.value)
    assert not (tmp_path / "mo").exists()
