"""What each engine profile does with the drafter, from its :class:`~eaglehub.profiles.Reading`
(docs/profiles.md): whether it builds and loads it, which aux layers the target captures for it, which
config keys it drops, which stored tensors it skips or fails on, which trained parts it leaves unused, and
the context it serves. Every finding here names the profiles it holds for and, when others judged here
disagree, says so.
"""

from __future__ import annotations

from collections.abc import Callable

from eaglehub.checks.config import MLA_MTP_MODEL_TYPES
from eaglehub.checks.context import Context, convert_command, set_command
from eaglehub.checks.holds import Said, merge, title
from eaglehub.checks.loaded import PER_FATE
from eaglehub.checks.profile_aux import aux_ignored, fc_width
from eaglehub.drafter.canonical import MLA, layer_kind
from eaglehub.drafter.shapes import expected_tensors
from eaglehub.findings import Finding
from eaglehub.formats.registry import FORMATS
from eaglehub.profiles.reading import FATAL, IGNORED, LoadFailure, Reading
from eaglehub.profiles.reading import FIELDS as READING_FIELDS
from eaglehub.profiles.registry import MRV2, PROFILES, READ_RELEASES, VLLM, nearest_read, resolve
from eaglehub.profiles.weights import QUANT_SUFFIXES


def _said_elsewhere(ctx: Context, f: LoadFailure) -> bool:
    """One wrong field, one finding: a load failure another check already states. A stored shape the
    config's own reading contradicts too is the layout check's (E-TENSOR-SHAPE / E-CONFIG-DIM); fc's width
    against the class's aux count is E-AUX-COUNT (checks/profile_aux.py); the MTP rewrite of an MLA drafter's
    model_type is E-MLA-MODELTYPE (checks/config.py)."""
    cfg = ctx.drafter.config
    if f.field == "model_type" and f.tensor is None:
        return layer_kind(cfg) == MLA and cfg.get("model_type") in MLA_MTP_MODEL_TYPES
    if f.tensor is None:
        return False
    canonical = _canonical(ctx, f.tensor)
    if canonical == "fc.weight" and f.field.rsplit(".", 1)[-1] in ("num_aux_hidden_states", "num_aux_layers"):
        return True
    info = ctx.drafter.tensors.get(canonical)
    spec = next((s for s in expected_tensors(ctx.drafter) if s.name == canonical), None)
    if info is None or spec is None:
        return False
    return len(info.shape) != len(spec.shape) or any(e is not None and e != a for e, a in zip(spec.shape, info.shape))


def _canonical(ctx: Context, stored: str) -> str:
    return {name: canon for canon, name in ctx.drafter.names.items()}.get(stored, stored)


def _layout_knows(ctx: Context, stored: str) -> bool:
    """The drafter's layout defines the tensor (an unknown name is E-TENSOR-UNEXPECTED's)."""
    canonical = _canonical(ctx, stored)
    return any(s.name == canonical for s in expected_tensors(ctx.drafter))


def _load(ctx: Context, r: Reading) -> list[Said]:
    out = []
    for f in r.failures:
        if _said_elsewhere(ctx, f):
            continue
        hint = None
        if f.tensor is not None and f.implied is not None:
            hint = set_command(ctx, f.field, f.implied)
        elif f.field == "target_hidden_size":
            fc = ctx.drafter.tensors.get("fc.weight")
            a = r.num_aux_hidden_states
            ht = fc.shape[1] // a if fc is not None and len(fc.shape) == 2 and a else r.hidden_size
            hint = set_command(ctx, "target_hidden_size", ht)
        out.append(Said("E-ENGINE-LOAD", f.field, f"{f.message} ({f.cite})", hint))
    return out


#: the biases SGLang's Llama drafter never builds, and the config keys vLLM builds them from
_SGLANG_NO_BIAS = ((".self_attn.", "attention_bias"), (".mlp.", "mlp_bias"))


def _bias_hint(ctx: Context, r: Reading, stored: str) -> str | None:
    """The config edit that makes the engine build the bias a stored tensor would fill (``None``: none does)."""
    for part, key in _SGLANG_NO_BIAS:
        if part in stored and r.engine != VLLM:
            if ".o_proj." in stored:
                return "if the drafter was trained with attention biases: " + set_command(ctx, "attention_bias", True)
            return (
                f"{title(r.profile)} has no switch that builds it: serve the drafter on vLLM, where "
                f"{key} builds it (eaglehub validate {ctx.drafter.path} --profile vllm-0.33-gpu)"
            )
        if part in stored and not getattr(r, key):
            what = "attention" if key == "attention_bias" else "MLP"
            return f"if the drafter was trained with {what} biases: " + set_command(ctx, key, True)
    return None


def _config_leaves_unused(ctx: Context, stored: str) -> bool:
    """A stored tensor the layout defines but the config's switches give no use (fc_norm gains with fc_norm off,
    input_norm without norm_before_fc, Qwen3 q/k norms on a Llama layer)."""
    canonical = _canonical(ctx, stored)
    spec = next((s for s in expected_tensors(ctx.drafter) if s.name == canonical), None)
    return spec is not None and spec.unused_code in PER_FATE


def _full_vocab_d2t_hint(ctx: Context, r: Reading) -> str:
    """A d2t shipped with a full vocabulary (no map parameter in the class): an identity map is left out by the
    vllm layout's writer; any other one orders lm_head's rows differently from the target ids, which no config
    or map edit serves."""
    import numpy as np

    from eaglehub.checks.context import convert_command, drafter_array

    full = f"draft_vocab_size equals the target's vocabulary ({r.draft_vocab_size})"
    try:
        identity = not bool(np.asarray(drafter_array(ctx.drafter, "d2t")).any())
    except (KeyError, OSError, ValueError):
        identity = True  # unreadable: the tensor checks say so; the layout without maps is still the fix
    if identity:
        return f"{full}, so d2t is the identity, which the vllm layout leaves out: {convert_command(ctx, '--format', 'vllm')}"
    return (
        f"{full}, but d2t is not the identity: lm_head row i scores target id i + d2t[i], and a full-vocabulary "
        "drafter has no map in vLLM; export lm_head with its rows in target-id order (row i = token i)"
    )


def _weights(ctx: Context, r: Reading) -> list[Said]:
    out = []
    for w in r.weights:
        # an unknown name is E-TENSOR-UNEXPECTED's (the layout check); here: tensors the layout knows that the
        # engine still refuses (d2t without a vocabulary map; quantization tensors are checks/quant.py's)
        if w.fate == FATAL and "d2t" in w.stored:
            if any(fix.field == "draft_vocab_size" for fix in ctx.dimension_fixes):
                continue  # the config's draft_vocab_size is what is wrong: E-CONFIG-DIM names it with the edit
            hint = None
            if "d2t" in w.stored and not r.vocab_map:
                hint = _full_vocab_d2t_hint(ctx, r)
            out.append(Said("E-ENGINE-WEIGHT", w.stored, w.why, hint))
        elif w.fate == FATAL and _config_leaves_unused(ctx, w.stored):
            continue  # checks/loaded.py says it per profile, with the config switch that uses it
        elif w.fate == FATAL and not w.stored.endswith(QUANT_SUFFIXES) and _layout_knows(ctx, w.stored):
            # a name this layout defines that vLLM's loader has no parameter for (TorchSpec's legacy
            # aux_norm_* gains): the vLLM layout's names load
            out.append(Said("E-ENGINE-WEIGHT", w.stored, w.why, convert_command(ctx, "--format", "vllm")))
        elif w.fate == IGNORED and _canonical(ctx, w.stored).startswith("fc.weight_") and not r.failures:
            # SGLang 0.5.23 builds fc as a plain torch.nn.Linear whatever the quantization config
            # (srt/models/llama_eagle3.py L163-167) and skips names it has no parameter for (L358-378): the
            # quantized fc.weight is copied in without its scale (its decoder layers do take the quant config)
            layer = "fc"
            out.append(
                Said(
                    "E-ENGINE-WEIGHT",
                    w.stored,
                    f"{w.why}: this engine builds {layer} unquantized and loads its quantized weight without the "
                    "scale, so the layer computes with wrong values and nothing is reported",
                    "quantize the unquantized drafter with fc kept (`eaglehub quantize` keeps it by default, --keep-fc), "
                    "or serve this one on a profile that loads it (vLLM builds fc quantized)",
                )
            )
        elif w.fate == IGNORED and w.stored.endswith(".bias") and not r.failures:
            out.append(
                Said(
                    "W-ENGINE-IGNORED",
                    w.stored,
                    f"{w.why}: the trained bias is not applied",
                    _bias_hint(ctx, r, w.stored),
                )
            )
        # other names an engine skips are said elsewhere: a name no layout has (E-TENSOR-UNEXPECTED), a tied
        # head (W-ENGINE-TIED), every tensor of a class that is no EAGLE-3 drafter (E-ENGINE-LOAD)
    if r.parameter_names is not None:
        filled = {w.param for w in r.weights if w.param}
        for name in r.parameter_names:
            if name.endswith(".bias") and name not in filled:
                key = "bias" if name.startswith("model.fc.") else "mlp_bias" if ".mlp." in name else "attention_bias"
                out.append(
                    Said(
                        "E-ENGINE-UNFILLED",
                        name,
                        f"the engine builds {name} (the config's {key}) but no stored tensor fills it: "
                        "it stays uninitialised and nothing is reported",
                        "if the drafter was trained without biases: " + set_command(ctx, key, False),
                    )
                )
    return out


def _dropped(ctx: Context, r: Reading) -> list[Said]:
    """W2: keys at the top of a speculators config that vLLM's adapter does not copy, where the engine then ends
    up with another value (:func:`_dropped_value_differs`)."""
    if not r.dropped_keys:
        return []
    raw = ctx.drafter.raw_config
    out = []
    rest: list[str] = []
    keys: list[str] = []
    for key in r.dropped_keys:
        if key == "num_aux_hidden_states" and raw.get(key) != r.num_aux_hidden_states:
            out.append(
                Said(
                    "E-SPECULATORS-DROPPED",
                    key,
                    f"num_aux_hidden_states {raw.get(key)!r} sits next to transformer_layer_config, where the speculators "
                    f"adapter does not copy it: fc is built for {r.num_aux_hidden_states} aux states",
                    set_command(ctx, f"transformer_layer_config.{key}", raw.get(key)),
                )
            )
        elif key == "quantization_config":
            out.append(
                Said(
                    "E-SPECULATORS-DROPPED",
                    key,
                    "quantization_config sits next to transformer_layer_config, where the speculators adapter does not "
                    "copy it: the drafter is built unquantized and its quantized tensors do not load",
                    set_command(ctx, f"transformer_layer_config.{key}", raw.get(key)),
                )
            )
        else:
            differs = _dropped_value_differs(raw, key, r)
            if differs is not None:
                rest.append(f"{key} {raw.get(key)!r} ({differs})")
                keys.append(key)
    if rest:
        out.append(
            Said(
                "W-SPECULATORS-DROPPED",
                keys[0],
                f"top-level {'; '.join(rest)} is dropped by the speculators adapter, which copies only its named "
                "keys (vllm/transformers_utils/configs/speculators/algos.py L15-50)",
                "if the engine should read them, move them into transformer_layer_config: "
                + set_command(ctx, f"transformer_layer_config.{keys[0]}", raw.get(keys[0])),
            )
        )
    return out


def _dropped_value_differs(raw: dict, key: str, r: Reading) -> str | None:
    """What the engine ends up with instead of a dropped top-level ``key``, when that differs from the stored
    value; ``None`` when the drop changes nothing. speculators writes some keys both at the top and inside
    ``transformer_layer_config`` (``tie_word_embeddings``), and the engine reads the layer config's: the same
    value there is no loss. A key the reading carries is compared with the engine's value (its default
    included); a null top-level value is no value; a key the engine's config holds nowhere is a loss."""
    layer = raw.get("transformer_layer_config")
    layer = layer if isinstance(layer, dict) else {}
    value = raw.get(key)
    if key in READING_FIELDS:
        engine = getattr(r, key)
        where = "transformer_layer_config" if key in layer else "its default"
        return None if value == engine else f"the engine reads {engine!r} from {where}"
    if key in layer:
        return None if value == layer[key] else f"the engine reads {layer[key]!r} from transformer_layer_config"
    return None if value is None else "the engine's config has no such key"


def _unused(ctx: Context, r: Reading) -> list[Said]:
    """M4 (SGLang's tied head) and M5 (windows an engine does not apply)."""
    out = []
    if r.tie_word_embeddings and "lm_head.weight" in ctx.drafter.names:
        out.append(
            Said(
                "W-ENGINE-TIED",
                "tie_word_embeddings",
                "tie_word_embeddings is true: SGLang uses embed_tokens as lm_head and the trained lm_head.weight is not "
                "loaded (sglang/srt/models/llama_eagle3.py L300-314)",
                set_command(ctx, "tie_word_embeddings", False),
            )
        )
    declared = [w for w in ctx.drafter.windows if w is not None]
    if declared and not any(w is not None for w in r.sliding_windows):
        why = (
            "SGLang ignores config windows (it applies --speculative-draft-window-size)"
            if r.engine != VLLM
            else "vLLM's MLA drafter ignores windows"
        )
        out.append(
            Said(
                "W-ENGINE-WINDOW",
                "sliding_window",
                f"the drafter declares a sliding window ({declared[0]}) that this engine does not apply: {why}; "
                "attention runs over the full context",
                "measure acceptance on long prompts with this engine (eaglehub diagnose --contexts long)",
            )
        )
    return out


def _context(ctx: Context, r: Reading) -> list[Said]:
    """W11: a shorter drafter context under a RoPE type vLLM 0.33 will not stretch lowers the target's context."""
    t = ctx.target
    if t is None or r.engine != VLLM or r.max_position_embeddings is None:
        return []
    text = t.text_config
    served = text.get("max_position_embeddings", t.config.get("max_position_embeddings"))
    if not isinstance(served, int) or isinstance(served, bool) or r.max_position_embeddings >= served:
        return []
    p = PROFILES.get(r.profile) or resolve(r.profile)
    if p.runner == MRV2:
        msg = (
            f"drafter max_position_embeddings {r.max_position_embeddings} with rope_type {r.rope_type!r}: vLLM does not "
            f"raise it for this RoPE type, so Model Runner V2 lowers the target's max_model_len from {served} to "
            f"{r.max_position_embeddings} (vllm/config/vllm.py L3025-3051)"
        )
        return [Said("W-CONTEXT-LOWERED", "max_position_embeddings", msg)]
    msg = (
        f"drafter max_position_embeddings {r.max_position_embeddings} with rope_type {r.rope_type!r}: the V1 runner keeps "
        f"the target's {served} and drafts no tokens past {r.max_position_embeddings} (vllm/config/speculative.py L1806-1846)"
    )
    return [Said("W-CONTEXT-LOWERED", "max_position_embeddings", msg)]


def _serve_alone(ctx: Context, r: Reading) -> list[Said]:
    """M2: ``vllm serve <drafter>`` of a speculators checkpoint needs a Hub id as verifier (0.33)."""
    if r.engine != VLLM or not r.verifier_error:
        return []
    return [Said("I-SERVE-VERIFIER", "speculators_config.verifier.name_or_path", r.verifier_error)]


RULES: tuple[Callable[[Context, Reading], list[Said]], ...] = (
    _load,
    _weights,
    aux_ignored,
    _dropped,
    _unused,
    _context,
    fc_width,
    _serve_alone,
)


#: load failures before any drafter class is chosen: the engine stops at its config, so nothing else it would
#: do with the checkpoint (aux capture, windows, weights) happens, and the first such failure is the one cause
_STOPS = ("speculators_config", "architectures")


def _stopped(ctx: Context, r: Reading) -> list[Said] | None:
    stop = next((f for f in r.failures if f.tensor is None and f.field in _STOPS), None)
    if stop is None:
        return None
    message, hint = f"{stop.message} ({stop.cite})", None
    if stop.field == "speculators_config":
        # SGLang reads the layout SGLang's producers write: the hint converts to it only where nothing is lost
        losses = FORMATS["specforge"].losses(ctx.drafter)
        if losses:
            message += "; SGLang's layout cannot hold it either: " + "; ".join(loss.what for loss in losses)
        else:
            hint = convert_command(ctx, "--format", "specforge")
    return [Said("E-ENGINE-LOAD", stop.field, message, hint)]


def _unread(profile_id: str) -> list[Said]:
    """A release whose code eaglehub has not read: its verdict is the nearest read release's code with the
    version rules eaglehub knows, and says so (never an unqualified OK for an engine nobody checked)."""
    p = resolve(profile_id)
    if p.version in READ_RELEASES[p.engine]:
        return []
    near = nearest_read(p)
    return [
        Said(
            "W-PROFILE-UNREAD",
            "--profile",
            f"this release's own code was not read: judged with {p.engine_title} {near}'s code and the version rules "
            "eaglehub knows, so what this release does differently is not checked",
            f"judge for a release whose code was read: {', '.join(f'--profile {q}' for q in PROFILES)}",
        )
    ]


def check(ctx: Context) -> list[Finding]:
    readings = ctx.readings
    said = {}
    for pid, r in readings.items():
        stopped = _stopped(ctx, r)
        said[pid] = _unread(pid) + (stopped if stopped is not None else [s for rule in RULES for s in rule(ctx, r)])
    return merge(said, list(readings))
