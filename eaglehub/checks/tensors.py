"""Tensor-level checks: names, shapes, dtypes (docs/formats.md §1, §5 MLA) and freshly-initialised weights (F2).

Tensor data is read as numpy (:func:`.context.drafter_array`), never through torch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from eaglehub.checks.context import Context, drafter_array, set_command
from eaglehub.checks.dims import DimFix
from eaglehub.checks.holds import Said, holding
from eaglehub.checks.loaded import unused
from eaglehub.drafter.canonical import LAYER0, QWEN3, config_dtype
from eaglehub.drafter.shapes import (
    MAX_AUX_DESCRIBED,
    described_layers,
    expected_tensors,
    layer_index,
    quantization_tensors,
    stored_layers,
)
from eaglehub.findings import Finding, finding
from eaglehub.profiles.reading import Reading

INIT_MIN_NUMEL = 4096  # smaller matrices are too noisy for the std test
INIT_SAMPLE_NUMEL = 1 << 18  # rows loaded for the std test, bounded
INIT_STD_RTOL = 0.01
FLOAT_CHECKED = {"float16", "bfloat16", "float32", "float64"}


def _rows_look_iid(t) -> bool:
    """Row norms as even as i.i.d. entries make them: their coefficient of variation is about
    1/sqrt(2·cols) for a random matrix, while training spreads them far wider. Guards the std test
    against a trained matrix whose std happens to sit at ``initializer_range``."""
    import numpy as np

    if t.shape[0] < 8:
        return True
    norms = np.linalg.norm(t, axis=1)
    cv = float(norms.std(ddof=1) / norms.mean()) if float(norms.mean()) > 0 else 0.0
    return cv < 1.5 / (2.0 * t.shape[1]) ** 0.5


def _fmt(shape) -> str:
    return "[" + ", ".join("?" if s is None else str(s) for s in shape) + "]"


#: unused_code -> message for a tensor the layer kind lacks; a tensor whose enabling flag is off gets the
#: flag's ``--set`` command instead (:data:`_ENABLING_FLAG`): a config edit loads trained weights, dropping loses them.
_UNUSED = {
    # neither engine's MLA drafter builds a pre-FC norm: vLLM 0.33.0 deepseek_eagle3.py (as 0.32.0) skips the name,
    # SGLang 0.5.23 srt/models/kimi_k25_eagle3.py L494-496 logs "skipping unexpected weight" and skips it
    "E-MLA-NORMBEFOREFC": (
        "{name} is present but neither engine's MLA drafter has a pre-FC norm: vLLM (deepseek_eagle3.py) skips the "
        "weight silently, SGLang (kimi_k25_eagle3.py) with a logged warning",
        "an MLA drafter cannot apply input_norm, and its other weights were trained after it: retrain the drafter "
        "without norm_before_fc",
    ),
}
#: what an engine that builds the parameter does without the tensor: it runs on with the initial value, silently
#: (neither engine reports a missing tensor: vLLM 0.33.0 Eagle3LlamaForCausalLM.load_weights, llama_eagle3.py
#: L420-470, returns no loaded set, so default_loader.py L510-523 skips its check; SGLang 0.5.23
#: DefaultModelLoader.load_weights_and_postprocess, srt/model_loader/loader.py L1028-1030, has none)
_MISSING_EFFECT = {
    "E-QKNORM-MISSING": ": the engine runs the Qwen3-style layer with unit q/k-norm gains, silently",
    # every engine that reads fc_norm on builds it and runs it so: a statement about the files, no profile named
    "E-FCNORM-MISSING": ": fc_norm is on, and vLLM and SGLang alike run it with unit gains for it, silently",
}
#: missing_code -> the profiles that build the parameter (vLLM's Qwen3 drafter class; SGLang has none, so it
#: refuses the class, E-ENGINE-LOAD)
_BUILT_BY: dict[str, Callable[[Reading], bool]] = {
    "E-QKNORM-MISSING": lambda r: r.model_class is not None and r.layer_kind == QWEN3,
}
_MISSING_HINT = "export the tensor from the training checkpoint (no engine reports it missing)"
#: unused_code -> (message, hint) built from the context (a config edit that makes the tensor load)
_UNUSED_EDIT = {
    "E-QKNORM-UNUSED": (
        "{name} is a Qwen3-style q/k-norm weight, but architectures {arch!r} names a Llama drafter class, "
        "whose layer has no q/k norms",
        "the q/k norms are trained: name the Qwen3-style drafter class, {command}",
        ("architectures", ["Eagle3Qwen3ForCausalLM"]),
    ),
}
_UNUSED_DEFAULT = "{name} is present but the config flag that enables it is off"
#: tensor-name prefix -> the config flag that makes vLLM load it
_ENABLING_FLAG = {"fc_norm.": "fc_norm", "input_norm.": "norm_before_fc"}


def _unused_hint(ctx: Context, name: str) -> str:
    flag = next((f for p, f in _ENABLING_FLAG.items() if name.startswith(p)), None)
    if flag is None:
        return "set the config flag that enables it, if the drafter was trained with it"
    return f"if the drafter was trained with {flag}: {set_command(ctx, flag, True)} (eaglehub probe measures which)"


def _dim_finding(ctx: Context, fix: DimFix) -> Finding:
    if fix.value is None:
        said = f"{fix.key} is absent (so {fix.used} is used)"
    else:
        said = f"{fix.key} is {fix.value}"
    evidence = ", ".join(f"{n} {_fmt(s)}" for n, s in fix.evidence.items())
    settled = [n for n in fix.settles if n in ctx.drafter.tensors]  # not the ones the wrong value only demanded
    listed = ", ".join(settled[:3]) + (f" and {len(settled) - 3} more" if len(settled) > 3 else "")
    return finding(
        "E-CONFIG-DIM",
        fix.key,
        f"{said}, but the tensors imply {fix.implied} ({evidence}): "
        f"with it, the shapes of {len(settled)} tensor{'s' * (len(settled) != 1)} follow ({listed})",
        f"the tensors are as trained; set the config: {set_command(ctx, fix.key, fix.implied)}",
    )


def _stray_bias(name: str) -> bool:
    """A decoder layer's attention or MLP bias the config does not declare (checks/profiles.py judges it)."""
    return layer_index(name) is not None and name.endswith(".bias") and (".self_attn." in name or ".mlp." in name)


def _aux_count_explains(ctx: Context, name: str, stored, implied) -> bool:
    """fc stored for another number of aux states than the config's (its rows right, its width a multiple of Ht):
    the count is the field at fault, and E-AUX-COUNT names it per engine profile with the edit."""
    ht = ctx.drafter.dims.Ht
    return (
        name == "fc.weight"
        and len(stored) == 2 == len(implied)
        and stored[0] == implied[0]
        and bool(ht)
        and stored[1] % ht == 0
        and stored[1] != implied[1]
    )


def check_expected(ctx: Context) -> list[Finding]:
    """Every expected tensor present with the implied shape; nothing unexpected (docs/formats.md §1, §5, shapes.py)."""
    tensors, out = ctx.drafter.tensors, []
    specs = {s.name: s for s in expected_tensors(ctx.drafter)}
    # every vLLM drafter class loads through AutoWeightsLoader, which raises ValueError on an unknown name
    # (vllm/model_executor/models/utils.py L431-458; deepseek_eagle3.py L370-398 too since 0.32); unknown
    # biases it skips without a word: checks/profiles.py reports those per engine (W-ENGINE-IGNORED)
    on_unknown = "vLLM raises ValueError on it; SGLang's Llama drafter skips it silently"
    fixes = ctx.dimension_fixes
    settled = {name for fix in fixes for name in fix.settles}
    from eaglehub.checks.attention import fix_hint, foreign_attention

    # an MLA config over Llama attention: the MLA tensors it lacks and the Llama ones it has follow from the class
    foreign = foreign_attention(ctx.drafter)
    missing_hint = fix_hint(ctx, foreign) if foreign is not None else _MISSING_HINT
    out += [_dim_finding(ctx, fix) for fix in fixes]
    fc_norm_missing: list[str] = []
    for name, spec in specs.items():
        info = tensors.get(name)
        if name in settled:  # its shape follows once the config field named above is fixed
            continue
        if info is None:
            if spec.required and spec.missing_code in _BUILT_BY:
                said = Said(
                    spec.missing_code,
                    name,
                    f"{name} {_fmt(spec.shape)} is missing" + _MISSING_EFFECT[spec.missing_code],
                    missing_hint,
                )
                out += holding(ctx, [said], _BUILT_BY[spec.missing_code], alone=f"{name} {_fmt(spec.shape)} is missing")
            elif spec.required and spec.missing_code == "E-FCNORM-MISSING":
                fc_norm_missing.append(f"{name} {_fmt(spec.shape)}")  # one finding for the drafter, below
            elif spec.required:
                message = f"{name} {_fmt(spec.shape)} is missing" + _MISSING_EFFECT.get(spec.missing_code, "")
                hint = missing_hint
                if spec.missing_code == "E-D2T-MISSING":  # t2d may hold the ids: the rebuild writes d2t from them
                    from eaglehub.checks.vocab import rebuild_hint

                    hint = rebuild_hint(ctx) or hint
                out.append(finding(spec.missing_code, name, message, hint))
            continue
        if spec.unused_code:
            if spec.unused_code in _UNUSED_EDIT:
                text, edit, (key, value) = _UNUSED_EDIT[spec.unused_code]
                message = text.format(name=name, arch=(ctx.drafter.config.get("architectures") or [None])[0])
                hint = edit.format(command=set_command(ctx, key, value))
                message = message.replace("{", "{{").replace("}", "}}")
            elif spec.unused_code in _UNUSED:
                message, hint = _UNUSED[spec.unused_code]
            else:
                message, hint = _UNUSED_DEFAULT, _unused_hint(ctx, name)
            out += unused(ctx, spec.unused_code, name, message.format(name=name), hint)
        if _aux_count_explains(ctx, name, info.shape, spec.shape):
            continue
        if len(info.shape) != len(spec.shape) or any(e is not None and e != a for e, a in zip(spec.shape, info.shape)):
            out.append(
                finding(
                    "E-TENSOR-SHAPE",
                    name,
                    f"{name} is {_fmt(info.shape)}, the config implies {_fmt(spec.shape)}",
                    fix_hint(ctx, foreign)
                    if foreign is not None and name.startswith(f"{LAYER0}self_attn.")
                    else "no config dimension explains it (validate tries each): re-export the tensor from the "
                    "training checkpoint",
                )
            )
    if fc_norm_missing:
        subject = fc_norm_missing[0].split(" ")[0] if len(fc_norm_missing) == 1 else "fc_norm.{i}.weight"
        verb = "is" if len(fc_norm_missing) == 1 else "are"
        message = f"{', '.join(fc_norm_missing)} {verb} missing" + _MISSING_EFFECT["E-FCNORM-MISSING"]
        out.append(
            finding(
                "E-FCNORM-MISSING",
                subject,
                message,
                "export the trained gains from the training checkpoint (no engine reports them missing)",
            )
        )
    declared, described = ctx.drafter.dims.layers, described_layers(ctx.drafter)
    if declared > described:  # one finding, however many layers the config claims
        span = f"layer {described} has" if declared == described + 1 else f"layers {described}..{declared - 1} have"
        out.append(
            finding(
                "E-TENSOR-MISSING",
                f"layers.{described}",
                f"config declares num_hidden_layers {declared}: {span} no tensors at all",
                f"count the stored layers: {set_command(ctx, 'num_hidden_layers', stored_layers(ctx.drafter))}",
            )
        )
    stored = stored_layers(ctx.drafter)
    for name in tensors:
        if name not in specs and not _stray_bias(name):
            layer = layer_index(name)
            if layer is not None and layer >= declared:  # trained layers the config does not count
                message = f"{name} belongs to layer {layer}, but the config declares num_hidden_layers {declared}"
                hint = f"count the stored layers: {set_command(ctx, 'num_hidden_layers', stored)}"
            elif foreign is not None and name in foreign.tensors:
                message = f"{name} is {foreign.kind} attention, which the config's MLA class has no parameter for"
                hint = fix_hint(ctx, foreign)
            elif name.startswith((LAYER0, "fc.", "norm.", "lm_head.", "embed_tokens.")):
                # already spelled as the layout spells a drafter's own tensors: storing it elsewhere is no fix
                message = f"{name} is not a tensor of this drafter's {ctx.drafter.layer_kind} layer ({on_unknown})"
                hint = (
                    "the name is already the layout's; no engine's drafter class has this parameter: check that the "
                    "config names the class the drafter was trained as (architectures, model_type)"
                )
            else:
                message = f"{name} is not a tensor of this layout ({on_unknown})"
                hint = (
                    "store it under the layout's name (fc, midlayer.*, norm, lm_head, d2t, t2d, fc_norm.{i}); "
                    "a checkpoint of another layout converts with eaglehub convert SRC DST"
                )
            out.append(finding("E-TENSOR-UNEXPECTED", name, message, hint))
    return out


#: bytes per element of the float dtypes a drafter's weights come in (float8 payloads are quantization's)
_FLOAT_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}
#: the two 16-bit formats trade range for precision: a cast between them is not exact either way
_SIXTEEN = frozenset({"float16", "bfloat16"})
#: where the engines give the drafter its dtype and cast each stored weight into it
_DTYPE_CITE = (
    "vLLM builds the drafter in the target's dtype (vllm 0.33.0 config/speculative.py L1418) and copies each "
    "weight into its parameter (model_loader/weight_utils.py L1543, a cast); SGLang builds it in its --dtype, "
    "by default the config's torch_dtype (sglang 0.5.23 srt/configs/model_config.py L881)"
)


def check_dtypes(ctx: Context) -> list[Finding]:
    """Float weights stored in another dtype than the config's ``torch_dtype`` (or than each other, F18).

    The engines never run the stored dtype: each weight is copied into a parameter of the model's dtype
    (:data:`_DTYPE_CITE`), so a float32 export under a bfloat16 config (ModelOpt from a float32 base) serves
    as bfloat16 from a file twice the size it needs: I-TENSOR-DTYPE-CAST. A cast between float16 and
    bfloat16 is not exact (float16 overflows past 65504, bfloat16 keeps 8 bits of mantissa against 11):
    W-TENSOR-DTYPE. Quantized payloads and quantization parameters are :mod:`.quant`'s
    (:func:`.quant.quantization_tensors`)."""
    want = config_dtype(ctx.drafter.config)
    quantized = quantization_tensors(ctx.drafter)
    floats = {n: i.dtype for n, i in ctx.drafter.tensors.items() if i.is_float and n not in quantized}
    counts = Counter(floats.values())
    if not counts:
        return []
    ref = want if want and want != "auto" else counts.most_common(1)[0][0]
    src = "the config's torch_dtype" if ref == want else "the other weights"
    out = []
    for dtype, n in counts.items():
        if dtype == ref:
            continue
        first = next(k for k, v in floats.items() if v == dtype)
        stored = f"{n} weight(s) are stored as {dtype} (e.g. {first}) but {src} is {ref}"
        if {dtype, ref} == _SIXTEEN:
            out.append(
                finding(
                    "W-TENSOR-DTYPE",
                    first,
                    f"{stored}: the engines cast them at load, which is not exact between the two 16-bit formats "
                    f"(float16 holds no value past 65504, bfloat16 fewer mantissa bits); {_DTYPE_CITE}",
                    f"re-export the weights in {ref} from the training checkpoint, or set torch_dtype to {dtype}: "
                    + set_command(ctx, "torch_dtype", dtype),
                )
            )
            continue
        size = _FLOAT_BYTES.get(dtype, 0) / _FLOAT_BYTES.get(ref, 0) if ref in _FLOAT_BYTES else 0
        times = "twice" if size == 2 else f"{size:g} times"
        extra = f", so the file holds them in {times} the bytes of {ref}" if size > 1 else ""
        out.append(
            finding("I-TENSOR-DTYPE-CAST", first, f"{stored}: the engines cast them at load ({_DTYPE_CITE}){extra}")
        )
    return out


def check_init(ctx: Context) -> list[Finding]:
    """Warn on weights that look untrained: RMSNorm weights all ones, all-zero tensors, a matrix whose
    std equals ``initializer_range`` (what ``strict=False`` loaders save, F2), all-zero quantization
    scales (every value dequantizes to 0). ``fc_norm.*`` are skipped
    (the 3.1 upgrade initialises them to ones by design), so is ``embed_tokens`` (copied from the target)."""
    import numpy as np

    d = ctx.drafter
    ir = d.config.get("initializer_range", 0.02)
    out = []
    for name, info in d.tensors.items():
        if (
            info.dtype not in FLOAT_CHECKED
            or name.startswith("fc_norm.")
            or name == "embed_tokens.weight"
            or not info.numel
        ):
            continue
        if name.endswith(("weight_scale", "input_scale")):  # a zero scale dequantizes every weight (or input) to 0
            payload = d.tensors.get(name.rpartition(".")[0] + ".weight")
            if name.endswith("weight_scale") and payload is not None and payload.dtype.startswith("float8"):
                continue  # an FP8 layer's dead blocks are E-QUANT-ZERO-BLOCK's (checks/zeros.py), values and scales
            if not bool(drafter_array(d, name).any()):
                out.append(
                    finding(
                        "W-TENSOR-INIT",
                        name,
                        f"{name} is all zeros: the layer's quantized values all dequantize to 0",
                        "re-quantize the layer (scales come from the weights' absolute maxima)",
                    )
                )
        elif len(info.shape) == 1 and name.endswith("norm.weight"):
            t = drafter_array(d, name)
            if bool((t == 1).all()):
                out.append(
                    finding(
                        "W-TENSOR-INIT",
                        name,
                        f"{name} is all ones (a freshly initialised RMSNorm)",
                        "check that the converter copied the trained weight",
                    )
                )
        elif len(info.shape) == 2 and info.numel >= INIT_MIN_NUMEL:
            # float64: a bounded sample, and the std is compared to 1 % of initializer_range
            t = drafter_array(d, name, max_rows=max(1, INIT_SAMPLE_NUMEL // info.shape[1])).astype(np.float64)
            std, mean = float(t.std(ddof=1)), float(t.mean())  # ddof=1: torch's Tensor.std
            if std == 0.0 and mean == 0.0:
                continue  # all zeros: E-TENSOR-ZERO (checks/zeros.py) says what the engine does with it
            if std == 0.0:
                out.append(
                    finding(
                        "W-TENSOR-INIT",
                        name,
                        f"{name} is constant ({mean:g})",
                        "check that the converter copied the trained weight",
                    )
                )
            elif (
                isinstance(ir, (int, float))
                and ir > 0
                and abs(std - ir) / ir < INIT_STD_RTOL
                and abs(mean) < 0.1 * ir
                and _rows_look_iid(t)
            ):
                out.append(
                    finding(
                        "W-TENSOR-INIT",
                        name,
                        f"{name} has std {std:.5f} ≈ initializer_range {ir}: looks randomly initialised",
                        "check that the converter copied the trained weight",
                    )
                )
    return out


#: 1.0 as stored, little-endian: a float equals 1 exactly when its bytes are these (IEEE has one encoding of 1.0)
_ONE = {"BF16": b"\x80\x3f", "F16": b"\x00\x3c", "F32": b"\x00\x00\x80\x3f", "F64": b"\x00" * 6 + b"\xf0\x3f"}


def _all_ones(d, name: str) -> bool:
    """Whether every value of float tensor ``name`` is exactly 1, from its stored bytes where the dtype allows (a
    plain conversion's check of its own output then imports no numpy), else as numpy reads it."""
    info = d.index.tensors.get(d.names[name])
    one = _ONE.get(info.st_dtype or "") if info is not None else None
    raw = d.index.load_bytes(d.names[name]) if one is not None else None
    if raw is None or one is None:
        return bool((drafter_array(d, name) == 1).all())
    return raw == one * (len(raw) // len(one)) and len(raw) % len(one) == 0


def check_fc_norm_unit(ctx: Context) -> list[Finding]:
    """W-FCNORM-UNIT: ``fc_norm`` on and every ``fc_norm.{i}.weight`` exactly one, which is what an
    uncalibrated 3 → 3.1 upgrade writes (docs/formats.md §7 step 4: a unit-gain RMSNorm still rescales each
    aux chunk per token, so the drafter is no longer the 3.0 one; measured here: AL 1.657 → 1.104).
    Reads only the ``A`` gain vectors ``[Ht]``."""
    d = ctx.drafter
    if not d.flags.fc_norm or d.dims.A > MAX_AUX_DESCRIBED:  # an absurd count is E-AUX-COUNT's
        return []
    names = [f"fc_norm.{i}.weight" for i in range(d.dims.A)]
    if not all(n in d.tensors and d.tensors[n].is_float for n in names):
        return []
    if not all(_all_ones(d, n) for n in names):
        return []
    return [
        finding(
            "W-FCNORM-UNIT",
            "fc_norm.0.weight",
            f"all {len(names)} fc_norm gain vectors are exactly 1, their initial value (an uncalibrated 3 → 3.1 upgrade, or gains "
            "never trained): unless the drafter was trained with these unit gains, it now normalises aux states it was not "
            "trained to see normalised, and acceptance drops until the gains are calibrated",
        )
    ]
