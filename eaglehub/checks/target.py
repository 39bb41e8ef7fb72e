"""Drafter ↔ target checks (``--target``): what the pair must agree on, read from the target's
config and side files only (:data:`.context.TARGET_SIDE_FILES`; weights only when already on disk).

* hidden size, vocabulary, dtype, RoPE (docs/vllm.md §6, §14; F14, F18); the embedding each engine uses and
  the context length it runs the drafter at (F9, F13) per judged profile in :mod:`.served`;
* the target architecture against vLLM's registry (F4; docs/vllm.md §7, §8; table
  the engine table of each judged profile's release, :mod:`eaglehub.engines.tables`);
* attention family, MLA vs MHA (F22; docs/vllm.md §5);
* special-token ids, tokenizer size and identity (docs/formats.md §8; docs/vllm.md §8, §14);
* the chat template the training data was rendered with (F25);
* a quantized target with an unquantized drafter (F19).

The aux-id checks against the target's layers (range, defaults, F11, F12) are in :mod:`.aux`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eaglehub.checks.context import Context, TargetInfo
from eaglehub.checks.holds import Said, merge, per_profile
from eaglehub.checks.served import context, embedding
from eaglehub.checks.tokenizer import special_token_findings, template_findings, tokenizer_findings
from eaglehub.drafter.canonical import MLA, int_field
from eaglehub.findings import Finding, finding
from eaglehub.io import jsonio
from eaglehub.profiles.reading import Reading
from eaglehub.profiles.registry import MRV2, SGLANG, V1, Profile

#: multimodal wrappers whose outer model_type stands for an MLA language model (Kimi-K2.5); the text
#: model types come from vLLM (the ``mla_model_types`` of the default profile's engine table)
MLA_WRAPPER_TYPES = frozenset({"kimi_k25"})


def _rope_text(settings: tuple[Any, dict | None]) -> str:
    """``(theta, scaling)`` as a message says it: the scaling as JSON (never a Python repr)."""
    theta, scaling = settings
    return f"theta {json.dumps(theta)}, scaling {json.dumps(scaling) if scaling else 'none'}"


def rope_settings(cfg: dict) -> tuple[Any, dict | None]:
    """``(theta, scaling)`` from ``rope_theta``/``rope_scaling`` or transformers-5 ``rope_parameters``;
    ``type`` is read as ``rope_type`` and a plain ``default`` schedule counts as no scaling. ``theta`` is a
    float when the config's value is a usable number, else that value as written."""
    params = cfg["rope_parameters"] if isinstance(cfg.get("rope_parameters"), dict) else {}
    theta = cfg.get("rope_theta", params.get("rope_theta", 10000.0))
    raw = cfg["rope_scaling"] if isinstance(cfg.get("rope_scaling"), dict) else None
    scaling = dict(raw or {k: v for k, v in params.items() if k != "rope_theta"})
    if "type" in scaling:
        scaling.setdefault("rope_type", scaling.pop("type"))
    if scaling.get("rope_type", "default") == "default" and set(scaling) <= {"rope_type"}:
        scaling = {}
    if (
        isinstance(theta, (int, float)) and not isinstance(theta, bool) and abs(theta) < 1e300
    ):  # huge ints overflow float()
        theta = float(theta)
    return theta, scaling or None


def _first_str(x) -> str | None:
    return x[0] if isinstance(x, list) and x and isinstance(x[0], str) else None


def _shown(text: str) -> str:
    """A config string as a message shows it: quoted and escaped when it holds control characters
    (config values are untrusted input, and a finding's message is one line)."""
    return text if text.isprintable() else json.dumps(text)


#: where each runner raises for a target class without SupportsEagle3 (the same text in 0.32.0 and 0.33.0)
_NO_EAGLE3_CITE = {
    ("0.32", MRV2): "vllm 0.32.0 v1/worker/gpu/spec_decode/eagle/eagle3_utils.py L19-20",
    ("0.32", V1): "vllm 0.32.0 v1/worker/gpu_model_runner.py L5234-5237",
    ("0.33", MRV2): "vllm 0.33.0 v1/worker/gpu/spec_decode/eagle/eagle3_utils.py L28-29",
    ("0.33", V1): "vllm 0.33.0 v1/worker/gpu_model_runner.py L5173-5177",
}
_SGLANG_NO_EAGLE3 = "sglang 0.5.23 srt/model_executor/model_runner_components/attention_backend_setup.py L55-60"


def _architecture_said(arch: str, profile: Profile) -> Said | None:
    """F4 for one profile, from the engine table of its release (:func:`eaglehub.engines.tables.profile_table`:
    the release's own table, else the nearest shipped release at or below it, said in the message)."""
    from eaglehub.engines.tables import profile_table

    choice = profile_table(profile)
    table = choice.table
    if table.supports_eagle3(arch):
        return None
    where = f"{choice.title}" + (f" ({choice.note})" if choice.note else "")
    shown = _shown(arch)
    if profile.engine == SGLANG:
        registered = (
            f"registered in {where}"
            if table.knows(arch)
            else f"not registered in {where}, so SGLang builds its Transformers fallback, which"
        )
        return Said(
            "E-TARGET-NO-EAGLE3",
            "target architectures",
            f"{shown} is {registered} has no set_eagle3_layers_to_capture: SGLang cannot capture aux hidden states "
            f'from it and stops at load ("does not implement set_eagle3_layers_to_capture", {_SGLANG_NO_EAGLE3})',
        )
    if table.knows(arch):
        minor = ".".join(profile.version.split(".")[:2])
        cite = _NO_EAGLE3_CITE.get((minor, profile.runner or V1))
        return Said(
            "E-TARGET-NO-EAGLE3",
            "target architectures",
            f"{shown} is registered in {where} but its model class does not implement SupportsEagle3: vLLM cannot "
            'capture aux hidden states from it and stops at load ("Model does not support EAGLE3 interface"'
            + (f", {cite})" if cite else ")"),
        )
    return Said(
        "W-TARGET-UNKNOWN-ARCH",
        "target architectures",
        f"{shown} is not a text-generation architecture registered in {where}: vLLM may still serve it through its "
        "Transformers backend (which implements SupportsEagle3) if transformers knows the class, or refuse it",
    )


def architecture_verdict(arch: str, profile: Profile) -> tuple[bool | None, str | None]:
    """``(captures, why)`` for a target class on one profile: ``True`` (EAGLE-3 capable in the release's table),
    ``False`` (the engine stops at load) or ``None`` (vLLM does not register it: its Transformers backend may
    serve it), with the finding's message as the reason."""
    said = _architecture_said(arch, profile)
    if said is None:
        return True, None
    return (False if said.code.startswith("E-") else None), said.message


def _architecture(ctx: Context) -> list[Finding]:
    """F4: an engine captures aux hidden states only from target classes that support it: vLLM from classes
    implementing ``SupportsEagle3`` (since 0.22 that interface is the only gate; a target without it fails at
    load), SGLang from classes with ``set_eagle3_layers_to_capture``. The target is named by the outer
    ``architectures[0]``, which for multimodal models is the wrapper class the engine builds. Judged per
    profile against the architecture table of that profile's release (Granite MoE targets, say, are EAGLE-3
    capable from vLLM 0.33, not in 0.32)."""
    assert ctx.target is not None  # check() runs these with a target only
    arch = _first_str(ctx.target.config.get("architectures"))
    if arch is None:
        return []
    judged = [p.id for p in ctx.options.engine_profiles()]
    said: dict[str, list[Said]] = {}
    for p in ctx.options.engine_profiles():
        one = _architecture_said(arch, p)
        said[p.id] = [one] if one else []
    return merge(said, judged)


def _mla_model_types() -> frozenset[str]:
    """vLLM's MLA model types (``ModelArchConfigConvertor.is_deepseek_mla``), from the table of the default
    profile's release; the set is the same in every vLLM table shipped (0.32.0, 0.33.0)."""
    from eaglehub.engines.tables import profile_table
    from eaglehub.profiles import DEFAULT_PROFILE, resolve

    return profile_table(resolve(DEFAULT_PROFILE)).table.mla_model_types or frozenset()


def target_mla_reason(t: TargetInfo) -> str | None:
    """Why the target runs MLA attention in vLLM, or ``None`` for MHA/GQA.

    vLLM (``ModelArchConfigConvertor.is_deepseek_mla``) uses MLA for its MLA model types when the text
    config's ``kv_lora_rank`` is set, and for the Transformers backend whenever it is set. So an
    explicit ``kv_lora_rank`` decides; without the key an MLA model type counts (transformers'
    DeepSeek configs default the rank), an explicit ``null`` means MHA.
    """
    for cfg in (t.text_config, t.config):
        if "kv_lora_rank" in cfg:
            rank = int_field(cfg, "kv_lora_rank")
            return f"kv_lora_rank {rank}" if rank else None
    for cfg in (t.text_config, t.config):
        mt = cfg.get("model_type")
        if isinstance(mt, str) and (mt in _mla_model_types() or mt in MLA_WRAPPER_TYPES):
            return f"model_type {mt}"
    return None


def _family(ctx: Context) -> list[Finding]:
    """F22: MLA (Kimi-K2.x / DeepSeek) and MHA drafters are different layers; engines have taken the
    draft's attention backend from the target, failing at startup, and an MHA drafter for an MLA
    target accepted < 2 % (docs/failure-kinds.md F22; docs/vllm.md §5)."""
    d, t = ctx.drafter, ctx.target
    assert t is not None  # check() runs these with a target only
    mla = target_mla_reason(t)
    t_arch = _shown(_first_str(t.config.get("architectures")) or "the target")
    d_arch = _shown(_first_str(d.config.get("architectures")) or "drafter")
    if mla and d.layer_kind != MLA:
        return [
            finding(
                "W-TARGET-FAMILY",
                "architectures",
                f"the target uses MLA attention ({t_arch}, {mla}) but the drafter ({d_arch}) is an MHA (Llama) drafter: "
                "the draft may inherit the target's MLA attention backend, and a reported MHA drafter for an MLA target accepted < 2 % (F22)",
            )
        ]
    if not mla and d.layer_kind == MLA:
        return [
            finding(
                "W-TARGET-FAMILY",
                "architectures",
                f"the drafter ({d_arch}) is an MLA drafter but the target ({t_arch}) uses MHA attention: MLA drafters are "
                "built for Kimi-K2.x / DeepSeek targets, and the draft may inherit the target's attention backend (F22)",
            )
        ]
    return []


def _quant_method(cfg: dict, hf_quant: dict | None) -> str | None:
    """``quant_method`` of a ``quantization_config``, else ModelOpt's ``hf_quant_config.json`` algorithm."""
    qc = cfg.get("quantization_config")
    if isinstance(qc, dict):
        return _shown(str(qc.get("quant_method") or qc.get("quant_algo") or "unnamed method"))
    q = (hf_quant or {}).get("quantization")
    if isinstance(q, dict):
        return _shown(f"modelopt {q.get('quant_algo') or 'unnamed algorithm'}")
    return None


def _quant_pairing(ctx: Context) -> list[Finding]:
    """F19: before vLLM PR #25883 the drafter's layers took the verifier's quant config and expected
    quantized weights the BF16 drafter lacks (KeyError ``layers.0.mlp.down_proj.weight``). Info only:
    the versions this tool targets carry the fix (vLLM 0.33.0 llama_eagle3.py L176 ``get_draft_quant_config``),
    and SGLang takes the drafter's from its own flag and config (0.5.23 srt/configs/model_config.py L945-949)."""
    d, t = ctx.drafter, ctx.target
    assert t is not None  # check() runs these with a target only
    method = _quant_method(t.config, t.side_json("hf_quant_config.json")) or _quant_method(t.text_config, None)
    if method is None:
        return []
    if _quant_method(d.raw_config, jsonio.read_object(Path(d.path) / "hf_quant_config.json")) or _quant_method(
        d.config, None
    ):
        return []
    subject = (
        "target quantization_config"
        if "quantization_config" in t.config or "quantization_config" in t.text_config
        else "target hf_quant_config.json"
    )
    return [
        finding(
            "I-QUANT-PAIRING",
            subject,
            f"the target is quantized ({method}), the drafter is not: vLLM before PR #25883 built the drafter with the "
            "target's quant config and failed on its unquantized weights (KeyError layers.0.mlp.down_proj.weight); "
            "the engines judged here take the drafter's from its own config",
        )
    ]


#: target config fields the pairing checks compare; a stated one that is not a positive integer
#: skips its checks, which is said (E-TARGET-CONFIG) rather than done silently
TARGET_SIZE_KEYS = (
    "hidden_size",
    "num_hidden_layers",
    "vocab_size",
    "max_position_embeddings",
    "num_attention_heads",
)


def _malformed_sizes(t: TargetInfo) -> list[Finding]:
    out = []
    for key in TARGET_SIZE_KEYS:
        for cfg in (t.text_config, t.config):
            if key in cfg:
                v = cfg[key]
                if not (isinstance(v, int) and not isinstance(v, bool) and v > 0):
                    out.append(
                        finding(
                            "E-TARGET-CONFIG",
                            f"target {key}",
                            f"the target's {key} is {v!r}, not a positive integer: "
                            "the checks that compare it were skipped",
                        )
                    )
                break
    return out


def _dtype_mismatch(ctx: Context, mine: str, theirs: str) -> list[Finding]:
    """W-DTYPE-MISMATCH in each engine's terms. vLLM builds the draft model config with the target's dtype (0.33.0
    config/speculative.py L1418), so the drafter's weights are cast to it; SGLang builds it with the server's
    --dtype (0.5.23 srt/configs/model_config.py L965), "auto" unless given, which keeps each config's own dtype
    (L2284-2320), so the drafter runs in its own and meets the target's aux states in another."""
    head = f"drafter is {mine}, target is {theirs}"

    def say(r: Reading) -> list[Said]:
        if r.engine == SGLANG:
            return [
                Said(
                    "W-DTYPE-MISMATCH",
                    "torch_dtype",
                    f"{head}: SGLang runs the drafter in its own {mine} (--dtype auto) and the target's aux states "
                    f"and embeddings reach it in {theirs}",
                    f"serve both in one dtype: pass --dtype {theirs} to sglang.launch_server",
                )
            ]
        return [
            Said(
                "W-DTYPE-MISMATCH",
                "torch_dtype",
                f"{head}: vLLM builds the drafter in the target's {theirs}, casting its {mine} weights",
                f"nothing to change for vLLM: it casts the drafter to {theirs} when it loads it",
            )
        ]

    return per_profile(ctx, say)


def check(ctx: Context) -> list[Finding]:
    t = ctx.target
    if t is None:
        return []
    d, out = ctx.drafter, _malformed_sizes(t)
    if t.hidden is not None and d.dims.Ht is not None and d.dims.Ht != t.hidden:
        out.append(
            finding(
                "E-HIDDEN-MISMATCH",
                "target_hidden_size",
                f"drafter expects aux states of width {d.dims.Ht}, target hidden_size is {t.hidden}",
                "pair the drafter with the target it was trained on, or fix target_hidden_size",
            )
        )
    if t.vocab is not None and d.dims.V is not None and d.dims.V != t.vocab:
        out.append(
            finding(
                "E-VOCAB-MISMATCH",
                "vocab_size",
                f"drafter vocab_size {d.dims.V} != target vocab_size {t.vocab}",
                "vocab_size must be the target's; draft_vocab_size is the pruned size",
            )
        )
    if t.dtype and d.dtype and t.dtype != d.dtype:
        out += _dtype_mismatch(ctx, d.dtype, t.dtype)
    if t.hidden is not None:
        out += embedding(ctx)
    mine, theirs = (
        rope_settings(d.config),
        rope_settings(t.text_config),
    )  # multimodal targets: the language model's
    if mine != theirs:
        out.append(
            finding(
                "W-ROPE-MISMATCH",
                "rope_scaling",
                f"drafter RoPE {_rope_text(mine)} differs from the target's {_rope_text(theirs)}",
                "keep RoPE fields as trained; if a converter dropped them, copy them from the training config",
            )
        )
    for part in (
        _architecture,
        _family,
        context,
        special_token_findings,
        tokenizer_findings,
        template_findings,
        _quant_pairing,
    ):
        out += part(ctx)
    return out
