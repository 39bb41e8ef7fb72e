"""``--deep``: float tensors judged by what the engine does with them (E-TENSOR-ZERO, E-QUANT-ZERO-BLOCK).

A trained drafter never holds an all-zero RMSNorm gain, projection or embedding; a failed export or cast
does, and the engines load it without a word: the drafter is served, stays lossless and accepts less, often
nothing. What each zero does follows the drafter's forward pass (vLLM 0.33.0
model_executor/models/llama_eagle3.py: layer 0 concatenates ``input_layernorm(embeds)`` with
``hidden_norm(fc(aux))`` into q/k/v L133-137, ``post_attention_layernorm`` feeds the MLP L145-148, the final
``norm`` feeds ``lm_head`` L272, ``fc_norm`` / ``input_norm`` scale the aux states before ``fc`` L402-415;
SGLang 0.5.23 srt/models/llama_eagle3.py runs the same layer).

FP8 payloads are judged on their stored values, block by block as their scale lays them out (``[⌈out/bn⌉,
⌈in/bk⌉]``, one row per channel, one block per tensor): a block whose values are all zero, or whose scale is
zero, dequantizes to zeros whatever the other one holds (docs/quantization.md §2).

Whether the engine uses the tensor at all is each judged profile's (its loader's fate of the stored name, and
for ``embed_tokens`` whether the engine keeps the drafter's table): a zero the engine never reads is no finding.
"""

from __future__ import annotations

import math
import re

from eaglehub.checks.context import Context
from eaglehub.checks.holds import Said, per_profile
from eaglehub.drafter.shapes import quantization_tensors
from eaglehub.findings import Finding, finding
from eaglehub.profiles.reading import ACCEPTED, Reading
from eaglehub.profiles.registry import SGLANG

ROWS_BYTES = 16 << 20  # rows read per step: bounded memory on multi-GB tensors
EMBED = "embed_tokens.weight"
_SCALES = ("weight_scale", "weight_scale_inv")

#: name pattern -> what the engine computes with that tensor all zero
_EFFECTS: tuple[tuple[str, str], ...] = (
    (
        r"^norm\.weight$",
        "the final RMSNorm outputs zeros, so every draft logit is 0 and the drafter proposes the same token at "
        "every step: it accepts (almost) nothing",
    ),
    (
        r"^lm_head\.weight$",
        "every draft logit is 0, so the drafter proposes the same token at every step: it accepts (almost) nothing",
    ),
    (
        r"^fc\.weight$",
        "fc outputs zeros, so the drafter receives none of the target's hidden states and drafts from the token "
        "alone: acceptance collapses",
    ),
    (
        r"^input_norm\.weight$",
        "every aux state is zeroed before fc, so the drafter receives none of the target's hidden states: "
        "acceptance collapses",
    ),
    (
        r"^fc_norm\.(\d+)\.weight$",
        "aux state {0} is zeroed before fc, so the drafter never sees that target layer: acceptance drops",
    ),
    (
        r"^(midlayer|layers\.0)\.input_layernorm\.weight$",
        "the token's embedding is zeroed before attention, so the drafter never sees the token it continues "
        "from: acceptance collapses",
    ),
    (
        r"input_layernorm\.weight$",
        "the layer's attention input is zeroed, so its attention adds nothing: acceptance drops",
    ),
    (
        r"hidden_norm\.weight$",
        "fc's output is zeroed before attention, so attention never sees the target's hidden states: "
        "acceptance collapses",
    ),
    (
        r"post_attention_layernorm\.weight$",
        "the MLP's input is zeroed, so the layer's MLP adds nothing: acceptance drops",
    ),
    (
        r"self_attn\.[qk]_(proj|a_proj|b_proj)\.weight$|self_attn\.kv_(a|b)_proj(_with_mqa)?\.weight$",
        "every attention score is 0, so the layer weighs all positions alike: acceptance drops",
    ),
    (
        r"self_attn\.(v|o)_proj\.weight$",
        "the layer's attention outputs zeros and adds nothing: acceptance drops",
    ),
    (
        r"mlp\.(gate|up|down)_proj\.weight$",
        "the layer's MLP outputs zeros and adds nothing: acceptance drops",
    ),
    (
        r"(q|k)_norm\.weight$",
        "every query or key is zeroed, so the layer weighs all positions alike: acceptance drops",
    ),
    (
        rf"^{re.escape(EMBED)}$",
        "every token embeds to zero, so the drafter never sees the token it continues from: acceptance collapses",
    ),
)
_DEFAULT_EFFECT = "the engine multiplies by zeros where the trained values were: acceptance drops"
_HINT = "re-export the tensor from the training checkpoint (a trained drafter holds no all-zero {what})"


def effect(name: str) -> str:
    """What the engine computes with tensor ``name`` (canonical) all zero."""
    for pattern, text in _EFFECTS:
        m = re.search(pattern, name)
        if m:
            return text.format(*m.groups())
    return _DEFAULT_EFFECT


def _kind(name: str, shape: tuple) -> str:
    if name == EMBED:
        return "embedding"
    return "gain" if len(shape) == 1 and name.endswith("norm.weight") else "matrix" if len(shape) > 1 else "tensor"


def _all_zero(ctx: Context, name: str) -> bool:
    """Every value of ``name`` is 0 (read in row blocks of about :data:`ROWS_BYTES`; NaN is not 0)."""
    import numpy as np

    d = ctx.drafter
    info = d.tensors[name]
    if not info.shape:
        return not bool(np.asarray(d.index.load_numpy(d.names[name])).any())
    rows = info.shape[0]
    step = max(1, ROWS_BYTES // max(1, info.nbytes // max(1, rows)))
    for start in range(0, rows, step):
        if bool(np.any(d.index.load_numpy(d.names[name], max_rows=step, start_row=start) != 0)):
            return False
    return True


def _stored(ctx: Context, name: str) -> str:
    idx = ctx.drafter.names.get(name, name)
    info = ctx.drafter.index.tensors.get(idx)
    return info.source_name if info is not None else idx


def _used(ctx: Context, name: str, said: Said) -> list[Finding]:
    """``said`` for each judged profile whose engine uses ``name``: its loader accepts the stored name, and for
    ``embed_tokens`` the engine keeps the drafter's table. vLLM keeps a drafter's own table unless it equals the
    target's (0.33.0 v1/spec_decode/llm_base_proposer.py L1438-1470; Model Runner V2
    v1/worker/gpu/spec_decode/eagle/utils.py L18-34, L74), which an all-zero table never does; SGLang's EAGLE-3
    worker puts the target's table in its place (0.5.23 srt/speculative/eagle_worker_v2.py L363) unless the
    config states another target_hidden_size (checks/served.py). With no judged profile reaching its loader the
    finding is about the files."""
    stored = _stored(ctx, name)

    def say(r: Reading) -> list[Said]:
        if r.weights and next((w.fate for w in r.weights if w.stored == stored), None) != ACCEPTED:
            return []
        if name == EMBED and r.engine == SGLANG and r.target_hidden_size == r.hidden_size:
            return []
        return [said]

    if any(r.weights for r in ctx.readings.values()):
        return per_profile(ctx, say)
    return [finding(said.code, said.subject, said.message, said.hint)]


def _scale_of(ctx: Context, name: str) -> str | None:
    base = name.removesuffix(".weight")
    return next((f"{base}.{s}" for s in _SCALES if f"{base}.{s}" in ctx.drafter.tensors), None)


def _config_blocks(ctx: Context) -> set[tuple[int, int]]:
    """The weight block sizes the quantization config states (compressed-tensors ``block_structure``, the
    ``fp8`` method's ``weight_block_size``)."""
    from eaglehub.drafter.quant_config import read_quant_config

    qc = read_quant_config(ctx.drafter)
    found = {s.block for s in qc.targets.values() if s.block} if qc is not None else set()
    raw = ctx.drafter.config.get("quantization_config")
    wbs = raw.get("weight_block_size") if isinstance(raw, dict) else None
    if isinstance(wbs, list) and len(wbs) == 2 and all(isinstance(v, int) and v > 0 for v in wbs):
        found.add((wbs[0], wbs[1]))
    return found


def _side(n: int, parts: int, stated: set[int]) -> int:
    """Rows (or columns) of ``n`` one of ``parts`` scale entries covers: the size the config states when it
    gives ``parts``, else the power of two that does (block sizes are), else the smallest that does."""
    if parts <= 1:
        return n
    for b in sorted(stated):
        if math.ceil(n / b) == parts:
            return b
    lo, hi = math.ceil(n / parts), math.ceil(n / (parts - 1)) - 1
    return next((b for b in (1 << k for k in range(31)) if lo <= b <= hi), lo)


def _grid(ctx: Context, shape: tuple, scale_shape: tuple) -> tuple[int, int]:
    """``(bn, bk)``: rows and columns of the weight each scale entry covers."""
    out, inp = shape
    dims = list(scale_shape)
    if len(dims) == 2:
        blocks = _config_blocks(ctx)
        return _side(out, dims[0], {b[0] for b in blocks}), _side(inp, dims[1], {b[1] for b in blocks})
    if len(dims) == 1 and dims[0] == out and out > 1:
        return 1, inp
    return out, inp


def _dead_blocks(ctx: Context, name: str) -> tuple[int, int, int, int, tuple[int, int], tuple[int, int]]:
    """``(dead, total, zero values, zero scale, (bn, bk), first dead block (row, col))`` of FP8 weight
    ``name``: blocks whose stored values are all 0 or whose scale is 0."""
    import numpy as np

    d = ctx.drafter
    shape = tuple(d.tensors[name].shape)
    scale = _scale_of(ctx, name)
    scale_shape = tuple(d.tensors[scale].shape) if scale else ()
    bn, bk = _grid(ctx, shape, scale_shape)
    nr, nc = math.ceil(shape[0] / bn), math.ceil(shape[1] / bk)
    live = np.zeros((nr, nc), dtype=bool)
    rows_step = max(bn, (ROWS_BYTES // max(1, shape[1] * 4)) // bn * bn)
    for start in range(0, shape[0], rows_step):
        x = d.index.load_numpy(d.names[name], max_rows=rows_step, start_row=start) != 0
        for i in range(0, x.shape[0], bn):
            cols = x[i : i + bn].any(axis=0)
            live[(start + i) // bn] = np.add.reduceat(cols, np.arange(0, shape[1], bk)) > 0
    zero_values = int((~live).sum())
    scaled = np.ones((nr, nc), dtype=bool)
    if scale:
        s = np.asarray(d.index.load_numpy(d.names[scale]), dtype=np.float64)
        scaled = np.broadcast_to(s.reshape(nr, nc) if s.size == nr * nc else s.reshape(-1)[:1], (nr, nc)) != 0
    zero_scale = int((live & ~scaled).sum())
    dead = ~(live & scaled)
    first = tuple(int(v) for v in np.argwhere(dead)[0]) if dead.any() else (0, 0)
    return int(dead.sum()), nr * nc, zero_values, zero_scale, (bn, bk), (first[0], first[1])


def _block_finding(ctx: Context, name: str) -> list[Finding]:
    dead, total, zero_values, zero_scale, (bn, bk), (r, c) = _dead_blocks(ctx, name)
    if not dead:
        return []
    shape = tuple(ctx.drafter.tensors[name].shape)
    unit = "whole-tensor block" if total == 1 else f"{bn}x{bk} block" if bn > 1 else "row"
    why = []
    if zero_values:
        why.append(f"{zero_values} {'holds' if zero_values == 1 else 'hold'} only stored FP8 values of 0")
    if zero_scale:
        why.append(f"{zero_scale} {'has' if zero_scale == 1 else 'have'} a scale of 0")
    if dead == total:
        head = f"{name} {list(shape)}: every FP8 value dequantizes to 0 (of {total} {unit}s, {'; '.join(why)})"
        message = f"{head}: {effect(name)}"
    else:
        where = (
            f"rows {r * bn}..{min(shape[0], (r + 1) * bn) - 1} x columns {c * bk}..{min(shape[1], (c + 1) * bk) - 1}"
        )
        message = (
            f"{name} {list(shape)}: {dead} of {total} FP8 {unit}s dequantize to all zeros ({'; '.join(why)}; the "
            f"first: {where}): those outputs lose what those inputs would add, which no trained weight does"
        )
    said = Said(
        "E-QUANT-ZERO-BLOCK",
        name,
        message,
        "re-quantize the layer from its unquantized weights (each block's scale comes from its own absolute "
        "maximum, so no trained block rounds to all zeros)",
    )
    return _used(ctx, name, said)


def check(ctx: Context) -> list[Finding]:
    """E-TENSOR-ZERO for a float tensor that is all zero, E-QUANT-ZERO-BLOCK for FP8 weight blocks that
    dequantize to zeros; each for the judged profiles whose engine uses the tensor."""
    d = ctx.drafter
    quantized = quantization_tensors(d)
    out: list[Finding] = []
    for name, info in d.tensors.items():
        # a zero bias adds nothing, as an absent one does; scales are judged with the values they scale
        if not info.is_float or not info.numel or not name.endswith(".weight"):
            continue
        if name in quantized:
            if info.dtype.startswith("float8") and len(info.shape) == 2:
                out += _block_finding(ctx, name)
            continue
        if not _all_zero(ctx, name):
            continue
        kind = _kind(name, tuple(info.shape))
        said = Said(
            "E-TENSOR-ZERO",
            name,
            f"{name} {list(info.shape)} is all zeros (every {kind} value is 0): {effect(name)}",
            _HINT.format(what=kind if kind != "tensor" else "weight"),
        )
        out += _used(ctx, name, said)
    return out
