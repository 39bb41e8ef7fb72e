"""The parameters a Llama-style EAGLE-3 drafter class builds, with their shapes, and what the engine's weight
loader does with a stored tensor of another shape (vLLM 0.33.0 / 0.32.0 and SGLang 0.5.23, one process, tensor
parallel size 1: what ``vllm serve`` and ``sglang.launch_server`` do with a single GPU).

vLLM's ``Eagle3LlamaForCausalLM`` / ``Eagle3Qwen3ForCausalLM`` (``llama_eagle3.py`` L184-262, L300-345,
``qwen3_eagle3.py``) and SGLang's ``LlamaForCausalLMEagle3`` (``llama_eagle3.py`` L46-87, L122-207,
L272-320) build the same parameter names under ``model.``; their loaders by parameter kind:

* strict (``fc``, RMSNorm gains, ``draft_id_to_target_id``, row-parallel biases): every dimension must
  match, else ``AssertionError`` (vLLM ``layers/linear.py`` L404-412 and ``model_loader/weight_utils.py``
  L1529-1547; SGLang ``model_loader/weight_utils.py`` L1574-1586);
* vocabulary (``embed_tokens``, ``lm_head``): the rows must be the vocabulary (``AssertionError``), then the
  tensor is copied into the padded parameter, which raises ``RuntimeError`` on another width (vLLM
  ``layers/vocab_parallel_embedding.py`` L509-520; SGLang L430-446);
* column (the q/k/v and gate/up shards and their biases): the stored rows are narrowed to the shard: fewer
  raise ``RuntimeError``, more are cut without a word; the other dimension must match (vLLM
  ``model_executor/parameter.py`` L153-197, ``linear.py`` L1211-1240; SGLang ``layers/linear.py`` L528-582,
  L1490-1550);
* row (``o_proj``, ``down_proj`` weights): the stored columns are narrowed the same way, except that
  SGLang pads missing columns with zeros (vLLM ``parameter.py`` L216-226; SGLang ``linear.py``
  L1649-1711).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

from eaglehub.profiles.reading import ACCEPTED, LoadFailure, WeightFate

STRICT, VOCAB, COLUMN, ROW = "strict", "vocab", "column", "row"
#: a dimension's size as ``value(field) * factor``, one candidate per config field that sets it (the first
#: whose factor divides the stored size is the one blamed)
Dim = tuple[tuple[str, int], ...]

#: stored projection → the stacked parameter it loads into, and its shard (both engines' loaders)
STACKED = (
    (".q_proj", ".qkv_proj", "q"),
    (".k_proj", ".qkv_proj", "k"),
    (".v_proj", ".qkv_proj", "v"),
    (".gate_proj", ".gate_up_proj", "gate"),
    (".up_proj", ".gate_up_proj", "up"),
)


@dataclass(frozen=True)
class Built:
    """One parameter, or one shard of a stacked one, as the class builds it."""

    param: str
    shape: tuple[int, ...]
    dims: tuple[Dim, ...]
    loader: str


@dataclass(frozen=True)
class Layout:
    """What sizes a Llama-style drafter class: dimensions after the engine's own rules, and which optional
    parameters it builds."""

    hidden_size: int
    target_hidden_size: int
    num_aux_hidden_states: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    draft_vocab_size: int
    num_hidden_layers: int
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    fc_bias: bool = False
    fc_norm: bool = False
    norm_before_fc: bool = False
    fc: bool = True
    d2t: bool = False
    lm_head: bool = True
    qk_norm: bool = False

    @property
    def sized(self) -> bool:
        """Every dimension has a value: the built shapes are known."""
        return all(getattr(self, k) > 0 for k in _SIZES)


def layout(**dims: Any) -> Layout:
    """A :class:`Layout` from the reading's values: a dimension without a usable value becomes 0, and the
    layout is not :attr:`~Layout.sized` (names are still known; shapes are not)."""
    values: dict[str, Any] = {k: (v if k not in _SIZES or _usable(v) else 0) for k, v in dims.items()}
    return Layout(**values)


def _usable(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


#: the Layout fields that are sizes (the rest say which optional parameters are built)
_SIZES = frozenset(f.name for f in fields(Layout) if f.type == "int")


def built_params(lay: Layout) -> dict[tuple[str, str | None], Built]:
    """(parameter, shard) → :class:`Built`, for every parameter the class registers (shards of q/k/v and
    gate/up keyed by ``q``/``k``/``v``/``gate``/``up``)."""
    H, Ht, A = lay.hidden_size, lay.target_hidden_size, lay.num_aux_hidden_states
    nh, nkv, hd, inter = lay.num_attention_heads, lay.num_key_value_heads, lay.head_dim, lay.intermediate_size
    h: Dim = (("hidden_size", 1),)
    out: dict[tuple[str, str | None], Built] = {}

    def add(param: str, shard: str | None, shape: tuple[int, ...], dims: tuple[Dim, ...], loader: str) -> None:
        out[(param, shard)] = Built(param, shape, dims, loader)

    add("model.embed_tokens.weight", None, (lay.vocab_size, H), ((("vocab_size", 1),), h), VOCAB)
    add("model.norm.weight", None, (H,), (h,), STRICT)
    if lay.lm_head:
        add("lm_head.weight", None, (lay.draft_vocab_size, H), ((("draft_vocab_size", 1),), h), VOCAB)
    if lay.d2t:
        add("draft_id_to_target_id", None, (lay.draft_vocab_size,), ((("draft_vocab_size", 1),),), STRICT)
    if lay.fc:
        fc_in: Dim = (("num_aux_hidden_states", Ht), ("target_hidden_size", A))
        add("model.fc.weight", None, (H, Ht * A), (h, fc_in), STRICT)
        if lay.fc_bias:
            add("model.fc.bias", None, (H,), (h,), STRICT)
        if lay.norm_before_fc:
            add("model.input_norm.weight", None, (Ht * A,), (fc_in,), STRICT)
        if lay.fc_norm:
            for j in range(A):
                add(f"model.fc_norm.{j}.weight", None, (Ht,), ((("target_hidden_size", 1),),), STRICT)
    q: Dim = (("num_attention_heads", hd), ("head_dim", nh))
    kv: Dim = (("num_key_value_heads", hd), ("head_dim", nkv))
    i: Dim = (("intermediate_size", 1),)
    for n in range(lay.num_hidden_layers):
        p = f"model.layers.{n}."
        # the first layer reads the embedding and the fc output side by side (2 * hidden_size)
        qkv_in: Dim = (("hidden_size", 2),) if n == 0 else h
        width = 2 * H if n == 0 else H
        for shard, rows, dim in (("q", nh * hd, q), ("k", nkv * hd, kv), ("v", nkv * hd, kv)):
            add(p + "self_attn.qkv_proj.weight", shard, (rows, width), (dim, qkv_in), COLUMN)
            if lay.qkv_bias:
                add(p + "self_attn.qkv_proj.bias", shard, (rows,), (dim,), COLUMN)
        add(p + "self_attn.o_proj.weight", None, (H, nh * hd), (h, q), ROW)
        if lay.o_bias:
            add(p + "self_attn.o_proj.bias", None, (H,), (h,), STRICT)
        for shard in ("gate", "up"):
            add(p + "mlp.gate_up_proj.weight", shard, (inter, H), (i, h), COLUMN)
            if lay.mlp_bias:
                add(p + "mlp.gate_up_proj.bias", shard, (inter,), (i,), COLUMN)
        add(p + "mlp.down_proj.weight", None, (H, inter), (h, i), ROW)
        if lay.mlp_bias:
            add(p + "mlp.down_proj.bias", None, (H,), (h,), STRICT)
        for norm in ("input_layernorm", "post_attention_layernorm", "hidden_norm"):
            add(p + f"{norm}.weight", None, (H,), (h,), STRICT)
        if lay.qk_norm:
            for norm in ("q_norm", "k_norm"):
                add(p + f"self_attn.{norm}.weight", None, (hd,), ((("head_dim", 1),),), STRICT)
    return out


def parameter_names(lay: Layout) -> tuple[str, ...]:
    """The names ``named_parameters()`` gives (a stacked parameter once)."""
    return tuple(sorted({param for param, _ in built_params(lay)}))


def shard_of(stored: str) -> str | None:
    """The shard of a stacked parameter a stored name loads into (``q_proj`` → ``q``), else ``None``."""
    return next((shard for frag, _, shard in STACKED if frag in stored), None)


def _blame(dim: Dim, size: int) -> tuple[str, int, int | None]:
    """(field, the factor beside it, the value ``size`` implies for it) for a dimension the loader refused."""
    for field, factor in dim:
        if factor and size % factor == 0:
            return field, factor, size // factor
    return dim[0][0], dim[0][1], None


def _fit(shape: tuple[int, ...], b: Built, row_pads: bool) -> tuple[str | None, int | None, str | None]:
    """(exception the loader raises or ``None``, the dimension at fault, what happened to a tensor that loads
    with another shape: cut / padded)."""
    if len(shape) != len(b.shape):
        return "AssertionError", None, None
    narrowed = {COLUMN: 0, ROW: 1}.get(b.loader)
    changed = None
    if narrowed is not None and shape[narrowed] != b.shape[narrowed]:
        if shape[narrowed] > b.shape[narrowed]:
            changed = f"its {shape[narrowed] - b.shape[narrowed]} extra along dimension {narrowed} are cut"
        elif b.loader == ROW and row_pads:
            changed = f"the {b.shape[narrowed] - shape[narrowed]} missing along dimension {narrowed} are zeros"
        else:
            return "RuntimeError", narrowed, None
    for d, (have, want) in enumerate(zip(shape, b.shape)):
        if d == narrowed or have == want:
            continue
        if b.loader == VOCAB and d == 1:
            return "RuntimeError", d, None
        return "AssertionError", d, None
    return None, None, changed


def check_shapes(
    fates: tuple[WeightFate, ...],
    stored: dict[str, tuple[int, ...]],
    built: dict[tuple[str, str | None], Built],
    *,
    cls: str,
    key: Callable[[str], str],
    cites: dict[str, str],
    row_pads: bool = False,
) -> tuple[tuple[WeightFate, ...], list[LoadFailure]]:
    """Each accepted tensor's stored shape against the parameter it loads into: a shape the loader refuses is a
    :class:`LoadFailure` naming the config field (``key`` gives its config path) the mismatching dimension
    comes from and the value the stored shape implies, citing ``cites[loader kind]``; one it takes with rows cut
    or padded stays accepted, and its fate says so."""
    out, failures = [], []
    for w in fates:
        b = built.get((w.param, shard_of(w.stored))) if w.fate == ACCEPTED and w.param else None
        shape = stored.get(w.stored)
        if b is None or shape is None or tuple(shape) == b.shape:
            out.append(w)
            continue
        raised, d, changed = _fit(tuple(shape), b, row_pads)
        if raised is None:
            out.append(replace(w, why=f"loaded with another shape than {b.param} {list(b.shape)}: {changed}"))
            continue
        out.append(w)
        shard = f" ({shard_of(w.stored)} shard)" if shard_of(w.stored) else ""
        head = f"{raised}: {w.stored} is stored {list(shape)}, {cls} builds {b.param}{shard} {list(b.shape)}"
        if d is None:
            field, implied = b.dims[0][0][0], None
            said = "the ranks differ"
        else:
            field, factor, implied = _blame(b.dims[d], shape[d])
            said = f"dimension {d} is {field} {b.shape[d] // factor}" + (" here" if factor == 1 else f" × {factor}")
            said += f", the tensor implies {implied}" if implied is not None else ""
        failures.append(
            LoadFailure(
                key(field),
                f"{head}: {said}",
                cites[b.loader],
                tensor=w.stored,
                implied=implied,
            )
        )
    return tuple(out), failures
