"""What quantize does to each tensor: quantized or kept (with the reason), per vLLM's layer rules."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eaglehub.errors import EaglehubError
from eaglehub.quant.weights import SCHEMES, compressed_tensors_version, itemsize, scheme_preset

#: heads vLLM builds without a quant config; ignored explicitly (a "re:.*" target would match them, §3)
HEAD_IGNORE = ("re:.*lm_head$", "re:.*embed_tokens$")


FC_IGNORE = "re:.*fc$"


#: keep_fc default: vLLM-CPU loads fc ignored (docs/quantization.md §2); fc reads the concatenated aux states,
#: whose chunks differ in scale by ~8x on the fixture (docs/calibration.md §1), so one per-token activation
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


def _anchored(pattern: str) -> str:
    """A user ``--ignore`` entry as vLLM will match it: ``re:`` patterns as given (they must compile), bare names
    as the anchored regex they mean (``fc`` -> ``re:.*fc$``; :func:`eaglehub.drafter.quant_layers.anchored_ignore`)."""
    from eaglehub.drafter.quant_layers import anchored_ignore

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
    return anchored_ignore(pattern)


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
    """Decide per vLLM Linear of drafter ``d`` (:class:`eaglehub.drafter.canonical.Drafter`) whether it is quantized, and the
    ``quantization_config`` (docs/quantization.md §2) that makes vLLM build exactly those quantized.

    Raises:
        EaglehubError: an ignore entry that matches some but not all shards of a fused layer (vLLM refuses it,
            exit 2); nothing left to quantize (exit 1).
    """
    from eaglehub.drafter.quant_config import Scheme
    from eaglehub.drafter.quant_layers import (
        UNKNOWN_TARGET_LAYERS,
        block_fit_findings,
        decide_layer,
        ignore_matches,
        shard_only_ignores,
        vllm_layers,
        vllm_name,
    )

    sch = scheme_preset(scheme)
    block = tuple(sch.weights.block_structure) if sch.weights.block_structure else None
    written = [*HEAD_IGNORE, *([FC_IGNORE] if keep_fc else []), *dict.fromkeys(_anchored(p) for p in ignore)]
    layers = vllm_layers(d)
    not_divisible: list[dict[str, Any]] = []
    if block:
        # vLLM's rule exactly as validate applies it (checks.quant.block_fit_findings, TP 1)
        group = Scheme("group_0", "fp8", "float", 8, "block", block, None, True, False, False)
        for layer in layers:
            refused = block_fit_findings(layer, group, "quantization_config")
            if refused and decide_layer(*layer.vllm_names(1), layer.cls, written, {"Linear": None})[0] != "ignored":
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
        if not any(
            ignore_matches(n, pattern) for n in names
        ):  # most likely a typo: say so instead of writing a dead entry
            raise EaglehubError(
                f"--ignore {pattern!r} matches no module vLLM builds for this drafter",
                hint=f"vLLM's names: {', '.join(names[:4])}, ...; e.g. --ignore 're:.*mlp\\.down_proj$'",
            )
    verdicts: dict[str, tuple[str, str | None]] = {}
    kind: str | None  # a layer's verdict below, then a tensor's (None: not a Linear weight)
    layer_rows = []
    for layer in layers:
        seen = {decide_layer(*layer.vllm_names(n), layer.cls, written, {"Linear": None}) for n in UNKNOWN_TARGET_LAYERS}
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
                f"--ignore {', '.join(only)} matches {', '.join(b.rpartition('.')[2] for b, _ in layer.shards if any(ignore_matches(vllm_name(b, 1), p) for p in only))} "
                f"but not the fused {leaf}: vLLM builds a drafter's {leaf} as one layer and compares the ignore "
                "list with that name only",
                hint=f"ignore the whole layer: --ignore 're:.*{leaf}$'",
            )
        if (
            kind == "ignored"
            and layer.fused
            and not all(any(ignore_matches(b, p) for p in written) for b, _ in layer.shards)
        ):
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
                    math.prod(scale) * itemsize(info.dtype),
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
        "version": compressed_tensors_version(),
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
