"""Quantization configs of drafters, read the way vLLM reads them: compressed-tensors ``config_groups``
(targets, schemes, ignore list, KV-cache scheme; validated as compressed-tensors' pydantic models and
``CompressedTensorsConfig.from_config`` would), and the other methods vLLM loads drafters from
(docs/quantization.md §2, §5). The checks against the tensors are in :mod:`.quant`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from eaglehub.drafter.canonical import Drafter
from eaglehub.findings import Finding, finding
from eaglehub.io import jsonio

CT = "compressed-tensors"
#: quant_method values vLLM loads drafters from that eaglehub checks by tensor name only (docs/quantization.md §5).
LOOSE_METHODS = frozenset(
    {"fp8", "fbgemm_fp8", "ptpc_fp8", "modelopt", "modelopt_fp4", "modelopt_mxfp8", "modelopt_mixed", "quark"}
)
HIGH_PRECISION = frozenset({"float16", "bfloat16", "float32", "float64"})
CT_PARAMS = (
    "weight_scale",
    "input_scale",
    "weight_zero_point",
    "weight_shape",
    "weight_global_scale",
    "input_global_scale",
)
LOOSE_PARAMS = ("weight_scale", "weight_scale_inv", "weight_scale_2", "input_scale", "k_scale", "v_scale")
KV_PARAMS = ("k_scale", "v_scale")
ALL_PARAMS = tuple(dict.fromkeys(CT_PARAMS + LOOSE_PARAMS))
SCALAR = "scalar"  # a shape written [] or [1]
PACKED, LOW, PLAIN = "packed", "low", "plain"


class _Bad(Exception):
    """A malformed quantization_config: ``subject`` (key path below the config) and ``message``."""

    def __init__(self, subject: str, message: str):
        super().__init__(message)
        self.subject = subject


@dataclass(frozen=True)
class Scheme:
    """What one compressed-tensors config group asks of each Linear it targets."""

    group: str
    kind: str  # "fp8" | "int8" | "packed" (WNA16) | "other" (checked by name only)
    type: str  # "float" | "int"
    bits: int
    strategy: str
    block: tuple[int, int] | None
    group_size: int | None
    symmetric: bool
    static_input: bool
    packed: bool  # a *pack-quantized format: the payload is weight_packed

    @property
    def payload(self) -> tuple[str, str]:
        """(suffix, dtype) of the stored weight."""
        return (
            ("weight_packed", "int32")
            if self.kind == PACKED
            else ("weight", "float8_e4m3fn" if self.kind == "fp8" else "int8")
        )

    def params(self, out: int | None, inp: int | None) -> dict[str, tuple | str | None]:
        """Parameter suffix -> shape vLLM creates for an ``[out, in]`` Linear (``None``: presence only,
        where the config lacks a dimension)."""
        if out is None or inp is None:
            return {
                "weight_scale": None,
                **({"weight_shape": (2,)} if self.kind == PACKED else {}),
                **({"input_scale": SCALAR} if self.static_input else {}),
            }
        cols = 1 if self.strategy == "channel" else math.ceil(inp / self.group_size) if self.group_size else None
        if self.kind == PACKED:
            p: dict[str, tuple | str | None] = {"weight_scale": (out, cols), "weight_shape": (2,)}
            if not self.symmetric:
                p["weight_zero_point"] = (math.ceil(out * self.bits / 32), cols)
            return p
        scale = {
            "channel": (out, 1),
            "tensor": SCALAR,
            "group": (out, cols),
            "block": self.block and (math.ceil(out / self.block[0]), math.ceil(inp / self.block[1])),
        }.get(self.strategy)
        return {"weight_scale": scale, **({"input_scale": SCALAR} if self.static_input else {})}

    def describe(self) -> str:
        """E.g. ``config group 'group_0' (float8 block [128, 128])``."""
        size = f" {list(self.block)}" if self.block else f" {self.group_size}" if self.group_size else ""
        static = ", static input scale" if self.static_input else ""
        return f"config group {self.group!r} ({self.type}{self.bits} {self.strategy}{size}{static})"


@dataclass
class QuantConfig:
    """A drafter's quantization config. ``source`` names where it came from (the subject prefix of its
    findings); ``targets`` maps each compressed-tensors target to its scheme in vLLM's matching order."""

    method: str
    source: str
    targets: dict[str, Scheme] = field(default_factory=dict)
    ignore: list[str] = field(default_factory=list)
    error: Finding | None = None

    @property
    def checked(self) -> bool:
        """Compressed-tensors and well formed: checked layer by layer."""
        return self.method == CT and self.error is None


def _posint(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _regex(pattern: str, where: str) -> None:
    if pattern.startswith("re:"):
        try:
            re.compile(pattern[3:])
        except re.error as exc:
            raise _Bad(where, f"{pattern!r} is not a valid regular expression ({exc})") from exc


def _args(d, where: str) -> dict:
    """Validate one compressed-tensors ``QuantizationArgs`` block the way its pydantic model does (the
    rules vLLM would otherwise fail on at start-up); returns it with the strategy inferred."""
    if not isinstance(d, dict):
        raise _Bad(where, "must be an object")
    bits, typ, g, block = (
        d.get("num_bits", 8),
        d.get("type", "int"),
        d.get("group_size"),
        d.get("block_structure"),
    )
    strategy = d.get("strategy") or (
        "tensor" if g is None else "group" if _posint(g) else "channel" if g == -1 else None
    )
    problems = [
        (not _posint(bits), f"num_bits {bits!r} must be a positive integer"),
        (typ not in ("int", "float"), f"type {typ!r} must be 'int' or 'float'"),
        (
            strategy not in ("tensor", "channel", "group", "block", "token", "tensor_group", "attn_head"),
            f"strategy {strategy!r} is unknown",
        ),
        (
            strategy in ("group", "tensor_group") and not _posint(g),
            f"strategy {strategy} needs a positive group_size",
        ),
        (
            (strategy == "block") != (block is not None),
            "block_structure [bn, bk] goes with strategy block, and only with it",
        ),
        (
            block is not None and not (isinstance(block, list) and len(block) == 2 and all(map(_posint, block))),
            f"block_structure {block!r} must be two positive integers",
        ),
        (strategy == "token" and not d.get("dynamic", False), "token strategy needs dynamic: true"),
        (d.get("actorder") in ("group", "dynamic"), "vLLM no longer loads group/dynamic activation ordering"),
    ]
    bad = next((msg for cond, msg in problems if cond), None)
    if bad:
        raise _Bad(where, bad)
    return {**d, "num_bits": bits, "type": typ, "strategy": strategy}


def _scheme(key: str, group: dict, fmt: str) -> Scheme:
    where = f"config_groups.{key}"
    w = _args(group.get("weights"), f"{where}.weights")
    ia = group.get("input_activations")
    a = _args(ia, f"{where}.input_activations") if ia else None
    packed = fmt.endswith("pack-quantized")
    kind = (
        PACKED
        if packed and w["type"] == "int"
        else "other"
        if packed
        else "fp8"
        if (w["type"], w["num_bits"]) == ("float", 8)
        else "int8"
        if w["num_bits"] == 8
        else "other"
    )
    return Scheme(
        key,
        kind,
        w["type"],
        w["num_bits"],
        w["strategy"],
        tuple(w["block_structure"]) if w.get("block_structure") else None,
        w.get("group_size") if _posint(w.get("group_size")) else None,
        w.get("symmetric", True) is not False,
        a is not None and a.get("dynamic", False) is False,
        packed,
    )


def _parse_ct(raw: dict) -> tuple[dict[str, Scheme], list[str]]:
    """Targets and ignore list of a compressed-tensors config (``CompressedTensorsConfig.from_config``).

    Raises: _Bad at the first problem vLLM would refuse (or that leaves the layout undefined)."""
    fmt, groups, ignore, kv = (
        raw.get("format"),
        raw.get("config_groups"),
        raw.get("ignore"),
        raw.get("kv_cache_scheme"),
    )
    if not isinstance(fmt, str):
        raise _Bad("format", 'is missing: vLLM needs the compression format (e.g. "float-quantized")')
    if not isinstance(groups, dict) or not groups:
        raise _Bad("config_groups", "must be a non-empty object of quantization groups")
    targets: dict[str, Scheme] = {}
    for key, group in groups.items():
        tg = group.get("targets") if isinstance(group, dict) else None
        if not (isinstance(tg, list) and tg and all(isinstance(t, str) for t in tg)):
            raise _Bad(
                f"config_groups.{key}.targets",
                "must be a non-empty list of layer names, re: patterns or module classes",
            )
        if len(tg) == 1 and tg[0].endswith("Attention"):
            continue  # vLLM drops attention-only groups: KV-cache quantization is kv_cache_scheme's
        gfmt = group.get("format") or fmt
        if not isinstance(gfmt, str):
            raise _Bad(f"config_groups.{key}.format", "must be a string")
        scheme = _scheme(key, group, gfmt)
        for t in tg:
            _regex(t, f"config_groups.{key}.targets")
            targets[t] = scheme  # a later group wins a repeated target, keeping its place (vLLM's dict)
    if not (isinstance(ignore, list) and all(isinstance(e, str) for e in ignore)):
        raise _Bad("ignore", "must be a list of names or re: patterns (with lm_head and embed_tokens in it)")
    for e in ignore:
        _regex(e, "ignore")
    if kv is not None and not (
        isinstance(kv, dict)
        and kv.get("type") == "float"
        and kv.get("num_bits") == 8
        and kv.get("strategy") in ("tensor", "attn_head")
        and kv.get("symmetric")
    ):
        raise _Bad(
            "kv_cache_scheme",
            "vLLM loads only symmetric 8-bit float KV-cache scales per tensor or attention head",
        )
    return targets, ignore


def read_quant_config(drafter: Drafter) -> QuantConfig | None:
    """The drafter's quantization config: ``config.json`` ``quantization_config``, else
    ``hf_quant_config.json`` (legacy ModelOpt; ``quant_method`` inferred from ``quant_algo``), as vLLM
    reads them (``transformers_utils/config.py``). ``None`` when there is none, or when
    ``quantization_config`` is not an object (``E-CONFIG-SCHEMA`` reports that). A malformed config
    comes back with ``error`` set (one E-QUANT-CONFIG finding)."""
    raw, source = drafter.config.get("quantization_config"), "quantization_config"
    if raw is None:
        path = Path(drafter.path) / "hf_quant_config.json"
        if not path.is_file():
            return None
        source = path.name
        try:
            raw = jsonio.read(path)
        except (OSError, ValueError) as exc:
            return QuantConfig(
                "modelopt", source, error=finding("E-QUANT-CONFIG", source, f"{source} cannot be read: {exc}")
            )
        quant = raw.get("quantization") if isinstance(raw, dict) else None
        if isinstance(quant, dict) and "quant_method" not in raw:
            raw = {
                **raw,
                "quant_method": "modelopt_fp4" if "FP4" in str(quant.get("quant_algo", "")).upper() else "modelopt",
            }
    if not isinstance(raw, dict):
        return (
            None
            if source == "quantization_config"
            else QuantConfig(
                "modelopt", source, error=finding("E-QUANT-CONFIG", source, f"{source} is not a JSON object")
            )
        )
    method = raw.get("quant_method")
    qc = QuantConfig(method if isinstance(method, str) else "?", source)
    try:
        if method == CT:
            qc.targets, qc.ignore = _parse_ct(raw)
        elif not isinstance(method, str) or method not in LOOSE_METHODS:
            raise _Bad(
                "quant_method",
                f"{method!r} is not a method eaglehub checks for drafters: {CT!r} (tensor by tensor) or "
                f"{', '.join(sorted(LOOSE_METHODS))} (scales by name); docs/quantization.md §5",
            )
    except _Bad as bad:
        subject = f"{source}.{bad.subject}"
        qc.error = finding("E-QUANT-CONFIG", subject, f"{subject} {bad}")
    return qc
