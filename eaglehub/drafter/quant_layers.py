"""The Linears vLLM builds for a drafter, under the names it matches quantization ignore lists against (docs/quantization.md §5)."""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from eaglehub.drafter.canonical import Drafter
from eaglehub.drafter.quant_config import (
    Scheme,
)
from eaglehub.drafter.shapes import MLA, expected_tensors, layer_kind
from eaglehub.findings import Finding, finding

#: checkpoint Linears vLLM may build quantized (docs/quantization.md §5); everything else is never quantized.
QUANTIZABLE = frozenset(
    {
        "fc",
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
        "q_a_proj",
        "q_b_proj",
        "kv_a_proj_with_mqa",
        "kv_b_proj",
    }
)


#: vLLM's packed_modules_mapping: fused module -> the checkpoint Linears it is loaded from, in order.
FUSED: dict[str, dict[str, tuple[str, ...]]] = {
    "llama": {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")},
    MLA: {"fused_qkv_a_proj": ("q_a_proj", "kv_a_proj_with_mqa"), "gate_up_proj": ("gate_proj", "up_proj")},
}


#: vLLM module classes (targets that are class names match by substring); the rest are ColumnParallelLinear.
CLASSES = {
    "qkv_proj": "QKVParallelLinear",
    "gate_up_proj": "MergedColumnParallelLinear",
    "o_proj": "RowParallelLinear",
    "down_proj": "RowParallelLinear",
    "fc": "ReplicatedLinear",
    "kv_a_proj_with_mqa": "ReplicatedLinear",
    "fused_qkv_a_proj": "DeepSeekV2FusedQkvAProjLinear",
}


UNKNOWN_TARGET_LAYERS = range(1, 257)


@dataclass(frozen=True)
class Layer:
    """One Linear module as vLLM builds it. ``name``: canonical-style name of the module (e.g.
    ``midlayer.self_attn.qkv_proj``); ``shards``: ``(checkpoint base, [out, in])`` of the Linears it is
    loaded from; ``fused``: the leaf names vLLM expands a fused name into (empty if not fused)."""

    name: str
    shards: tuple[tuple[str, tuple], ...]
    fused: tuple[str, ...]

    @property
    def cls(self) -> str:
        return CLASSES.get(self.name.rpartition(".")[2], "ColumnParallelLinear")

    def vllm_names(self, n_target: int) -> tuple[str, list[str]]:
        """vLLM's prefixed name and its shards' names for a target with ``n_target`` layers."""
        name = vllm_name(self.name, n_target)
        leaf = self.name.rpartition(".")[2]
        return name, [name[: -len(leaf)] + s for s in self.fused]


def vllm_name(base: str, n_target: int | None) -> str:
    """Canonical module name -> the name vLLM gives it: ``model.`` prefix (all but ``lm_head``), drafter
    layer ``i`` at index ``n_target + i`` (``midlayer.`` is layer 0; ``N+i`` when ``n_target`` is ``None``)."""
    m = re.match(r"(?:midlayer|layers\.([0-9]{1,6}))\.(.*)", base)
    if m:
        i = int(m[1] or 0)
        index = n_target + i if n_target is not None else f"N+{i}" if i else "N"
        return f"model.layers.{index}.{m[2]}"
    return base if base == "lm_head" else f"model.{base}"


def vllm_layers(drafter: Drafter) -> list[Layer]:
    """The quantizable Linear modules vLLM builds for ``drafter``, fused as its packed_modules_mapping says
    (a fused family with one member present, e.g. MLA ``kv_a_proj_with_mqa`` without a query LoRA, stays unfused)."""
    fused = FUSED[MLA if layer_kind(drafter.config) == MLA else "llama"]
    into = {leaf: f for f, leaves in fused.items() for leaf in leaves}
    groups: dict[str, list] = {}
    for s in expected_tensors(drafter):
        base = s.name.removesuffix(".weight")
        prefix, _, leaf = base.rpartition(".")
        if base != s.name and leaf in QUANTIZABLE and len(s.shape) == 2:
            groups.setdefault(f"{prefix}.{into[leaf]}" if leaf in into else base, []).append((base, s.shape))
    layers = []
    for name, shards in groups.items():
        if len(shards) == 1:
            layers.append(Layer(shards[0][0], tuple(shards), ()))
        else:
            layers.append(Layer(name, tuple(shards), fused[name.rpartition(".")[2]]))
    return layers


def ignore_matches(value: str, pattern: str) -> bool:
    """vLLM ``is_equal_or_regex_match``: exact, or ``re:`` + ``re.match``."""
    return re.match(pattern[3:], value) is not None if pattern.startswith("re:") else pattern == value


def decide_layer(
    name: str, shards: list[str], cls: str, ignore: list[str], targets: Collection[str]
) -> tuple[str, str | None]:
    """vLLM's verdict on one drafter Linear (module docstring): ``("ignored", entry)``, ``("unmatched", None)`` or
    ``("quantized", target)``. ``shards`` (the names of a fused layer's parts) play no part: a drafter's quant config
    has no fused mapping (see :func:`shard_only_ignores` for entries that would need one)."""
    hits = [p for p in ignore if ignore_matches(name, p)]
    if hits:
        return "ignored", hits[0]
    target = next((t for t in targets if ignore_matches(name, t)), None)
    if target is None:
        target = next(
            (t for t in targets if (ignore_matches(cls, t) if t.startswith("re:") else t.lower() in cls.lower())),
            None,
        )
    return ("quantized", target) if target is not None else ("unmatched", None)


def shard_only_ignores(name: str, shards: list[str], ignore: list[str]) -> list[str]:
    """The ``ignore`` entries that match a shard of fused layer ``name`` (vLLM names) but not ``name`` itself: written
    for the checkpoint's Linears, they would ignore the layer where vLLM expands fused names into shards (the target's
    quant config), but not in a drafter's."""
    if not shards or any(ignore_matches(name, p) for p in ignore):
        return []
    return [p for p in ignore if any(ignore_matches(s, p) for s in shards)]


def anchored_ignore(entry: str) -> str:
    """The anchored regex a bare ignore entry meant (``fc`` -> ``re:.*fc$``)."""
    rest = re.sub(r"^(model\.)?(midlayer\.|layers\.\d+\.)?", "", entry.strip("*."))
    return f"re:.*{re.escape(rest)}$"


def block_fit_findings(layer: Layer, scheme: Scheme, source: str, tp: int = 1) -> list[Finding]:
    """vLLM ``validate_fp8_block_shape`` (``model_executor/layers/quantization/utils/fp8_utils.py``): at TP 1 every
    shard of a merged layer but the last fills whole row blocks; at TP > 1 every column-parallel partition
    (``rows / tp``) fills whole row blocks and every row-parallel one (``o_proj``, ``down_proj``: ``in / tp``) whole
    column blocks. Replicated layers (``fc``, MLA ``kv_a_proj_with_mqa``) are never split."""
    assert scheme.block is not None  # the caller checks for a block structure
    bn, bk = scheme.block
    subject = f"{source}.config_groups.{scheme.group}.weights.block_structure"
    leaf, cls = layer.name.rpartition(".")[2], layer.cls
    fused = f"the fused {leaf}" if layer.fused else leaf
    if cls == "ReplicatedLinear":
        return []
    if cls == "RowParallelLinear":
        base, (_, inp) = layer.shards[0]
        if tp > 1 and inp and inp % tp == 0 and (inp // tp) % bk:
            return [
                finding(
                    "E-QUANT-CONFIG",
                    subject,
                    f"block_structure {list(scheme.block)}: {base} has {inp} input columns, "
                    f'{inp // tp} per rank at TP {tp}, not a multiple of {bk}; vLLM refuses {leaf} ("not divisible by '
                    'weight quantization block_k")',
                    "pick a block size that divides every partition, or ignore those layers",
                )
            ]
        return []
    shards = layer.shards if tp > 1 else layer.shards[:-1]
    bad = [
        (b, s[0] // tp if tp > 1 else s[0]) for b, s in shards if s[0] and s[0] % tp == 0 and (s[0] // tp) % bn
    ]  # rows % tp: E-TP-DIVISIBILITY
    if not bad:
        return []
    (base, rows), per_rank = bad[0], f" per rank at TP {tp}" if tp > 1 else ""
    return [
        finding(
            "E-QUANT-CONFIG",
            subject,
            f"block_structure {list(scheme.block)}: {base} has {rows} rows{per_rank}, not a multiple "
            f'of {bn}; vLLM refuses {fused} ("not divisible by weight quantization block_n")',
            "pick a block size that divides every fused projection's rows, or ignore those layers",
        )
    ]
