"""vLLM's reading of an EAGLE-3 drafter, rule by rule as its code does it (docs/profiles.md).

Citations are to vLLM 0.33.0's files (``vllm/...``) unless marked; the drafter classes, their config keys
and weight loaders are byte-identical in 0.32.0 (both trees compared), so one citation holds for both.

1. Config loading. A config with ``speculators_config`` is read by the speculators adapter
   (``transformers_utils/config.py`` L360-366 picks it; ``configs/speculators/base.py`` L47-63,
   ``algos.py`` L15-50): the drafter config starts from ``transformer_layer_config`` and takes from the top
   level only ``draft_vocab_size``, ``target_hidden_size`` (unless null), ``norm_before_residual`` (default
   true), ``norm_before_fc``, ``fc_norm``, ``norm_output`` and the aux ids (when non-empty); the class comes
   from the layer's ``model_type`` (``llama`` / ``qwen3``, anything else raises). Every other top-level key
   is dropped. Any other config is parsed by its ``model_type``'s transformers class (LlamaConfig defaults).
2. The class: ``architectures[0]`` through the registry (``models/registry.py`` L698-707).
3. Dimensions and the aux count ``fc`` is sized for: Llama ``num_aux_hidden_states`` → nested id list →
   3 (``llama_eagle3.py`` L209-216); Qwen3 ``num_aux_layers`` → ``num_aux_hidden_states`` → top-level ids →
   nested ids → 3 (``qwen3_eagle3.py`` L201-214); MLA like Llama (``deepseek_eagle3.py`` L189-194).
   ``target_hidden_size`` is ``getattr(config, "target_hidden_size", hidden_size)``: a stored null is
   ``None`` and ``None * A`` raises ``TypeError`` (``llama_eagle3.py`` L218-221).
4. The aux layers the target captures: V1 runner top-level ids, else the nested list
   (``v1/worker/gpu_model_runner.py`` L5190-5223); Model Runner V2 top-level ids, DFlash/DSpark ids,
   top-level ``target_layer_ids`` (+1), ``eagle_config.layer_ids`` — never the nested
   ``eagle_aux_hidden_state_layer_ids`` (``v1/worker/gpu/spec_decode/eagle/eagle3_utils.py`` L113-150).
5. Vocabulary: ``draft_vocab_size`` defaults to ``vocab_size``; the ``draft_id_to_target_id`` parameter
   exists only when it differs from the target's vocabulary (``llama_eagle3.py`` L338-345, since 0.30).
6. Weights: ``t2d`` skipped, ``d2t`` renamed, ``midlayer.`` → ``layers.0.``, q/k/v and gate/up stacked;
   an unknown name raises ``ValueError``, an unexpected ``*.bias`` is skipped silently
   (``models/utils.py`` L431-458 and ``AutoWeightsLoader.load_weights``).
"""

from __future__ import annotations

from eaglehub.drafter.canonical import LLAMA, MLA, QWEN3, attention_windows
from eaglehub.formats.speculators import ADAPTER_KEYS
from eaglehub.profiles.checkpoint import ServedTarget, Stored
from eaglehub.profiles.common import (
    AUX,
    assemble,
    aux_lists,
    class_layout,
    config_dims,
    first_architecture,
    null_target_hidden,
)
from eaglehub.profiles.config import CLASS_DEFAULTS, block, id_list, int_value
from eaglehub.profiles.reading import LoadFailure, Reading
from eaglehub.profiles.registry import MRV2, Profile
from eaglehub.profiles.shapes import COLUMN, ROW, STRICT, VOCAB, built_params, check_shapes
from eaglehub.profiles.weights import expected_params, weight_fates

#: top-level keys of the speculators format that describe the checkpoint, not the model: not "dropped"
SPECULATORS_OWN = frozenset(
    {
        "speculators_config",
        "speculators_model_type",
        "speculators_version",
        "transformer_layer_config",
        "architectures",
        "auto_map",
        "torch_dtype",
        "dtype",
        "transformers_version",
        "has_no_defaults_at_init",
        "embed_requires_grad",
    }
)
#: ``speculators_model_type`` values the adapter registers (``algos.py``)
SPECULATORS_TYPES = frozenset({"eagle3", "peagle"})
#: the layer ``model_type`` → class the eagle3 adapter writes (``algos.py`` L39-46)
SPECULATORS_ARCH = {"llama": "Eagle3LlamaForCausalLM", "qwen3": "Eagle3Qwen3ForCausalLM"}

#: drafter ``architectures[0]`` → (layer kind, vLLM class) (``models/registry.py`` L698-707)
DRAFTER_CLASSES: dict[str, tuple[str, str]] = {
    "PEagleDraftModel": (LLAMA, "Eagle3LlamaForCausalLM"),
    "PeagleLlamaForCausalLM": (LLAMA, "Eagle3LlamaForCausalLM"),
    "Eagle3LlamaForCausalLM": (LLAMA, "Eagle3LlamaForCausalLM"),
    "Eagle3MiniMaxM2ForCausalLM": (LLAMA, "Eagle3LlamaForCausalLM"),
    "LlamaForCausalLMEagle3": (LLAMA, "Eagle3LlamaForCausalLM"),
    "Eagle3Qwen2_5vlForCausalLM": (LLAMA, "Eagle3LlamaForCausalLM"),
    "Eagle3Qwen3vlForCausalLM": (LLAMA, "Eagle3LlamaForCausalLM"),
    "Eagle3Qwen3ForCausalLM": (QWEN3, "Eagle3Qwen3ForCausalLM"),
    "PeagleQwen3ForCausalLM": (QWEN3, "Eagle3Qwen3ForCausalLM"),
    "Eagle3DeepseekV2ForCausalLM": (MLA, "Eagle3DeepseekV2ForCausalLM"),
    "Eagle3DeepseekV3ForCausalLM": (MLA, "Eagle3DeepseekV2ForCausalLM"),
}
#: draft ``model_type`` → the MTP architecture ``SpeculativeConfig.hf_config_override`` rewrites the config
#: to (0.32.0 and 0.33.0 alike, ``config/speculative.py`` L711-800 in 0.33); ``EAGLEConfig`` then prefixes
#: ``Eagle3``, a class the registry does not have (``transformers_utils/configs/eagle.py`` L55-63)
MTP_REWRITES = {
    "deepseek_v3": "DeepSeekMTPModel",
    "deepseek_mtp": "DeepSeekMTPModel",
    "deepseek_v32": "DeepseekV32MTPModel",
    "glm_moe_dsa": "DeepseekV32MTPModel",
    "deepseek_v4": "DeepSeekV4MTPModel",
    "pangu_ultra_moe": "OpenPanguMTPModel",
    "pangu_ultra_moe_mtp": "OpenPanguMTPModel",
    "kimi_k3": "KimiK3MTPModel",
    "dots3_note": "Dots3NoteMTPModel",
}
#: the loaders that compare a stored tensor's shape with the parameter, by kind (eaglehub/profiles/shapes.py)
SHAPE_CITES = {
    STRICT: "vllm/model_executor/layers/linear.py L404-412 (fc), model_loader/weight_utils.py L1529-1547",
    VOCAB: "vllm/model_executor/layers/vocab_parallel_embedding.py L509-520",
    COLUMN: "vllm/model_executor/parameter.py L145-197",
    ROW: "vllm/model_executor/parameter.py L216-226",
}
#: RoPE types whose ``max_position_embeddings`` only sizes the cos/sin cache: 0.33 raises a shorter
#: drafter's value to the target's only for these (``config/speculative.py`` L100-113)
CACHE_ONLY_ROPE = frozenset({"default", "linear", "llama3", "ntk", "proportional"})


def engine_config(stored: Stored, profile: Profile) -> tuple[dict, tuple[str, ...], list[LoadFailure], str]:
    """The attribute dict of the drafter's config object as vLLM builds it, the top-level keys it drops,
    config-level failures and where keys came from (``""`` flat, ``"transformer_layer_config."``)."""
    raw = stored.config
    if raw.get("speculators_config") is None:
        return dict(raw), (), [], ""
    failures: list[LoadFailure] = []
    kind = raw.get("speculators_model_type")
    layer = raw.get("transformer_layer_config")
    failure = _not_in(
        kind,
        SPECULATORS_TYPES,
        "speculators_model_type",
        f"ValueError: speculators_model_type {kind!r} is not one of {sorted(SPECULATORS_TYPES)}",
        "vllm/transformers_utils/configs/speculators/base.py L51-56",
    )
    if failure:
        failures.append(failure)
    if not isinstance(layer, dict):
        failures.append(
            LoadFailure(
                "transformer_layer_config",
                "ValueError: Must provide transformer_layer_config (a dictionary)",
                "vllm/transformers_utils/configs/speculators/base.py L88-94",
            )
        )
        layer = {}
    cfg = dict(layer)
    cfg["draft_vocab_size"] = raw.get("draft_vocab_size")
    if raw.get("target_hidden_size") is not None:
        cfg["target_hidden_size"] = raw["target_hidden_size"]
    cfg["norm_before_residual"] = raw.get("norm_before_residual", True)
    cfg["norm_before_fc"] = raw.get("norm_before_fc", False)
    cfg["fc_norm"] = raw.get("fc_norm", False)
    cfg["norm_output"] = raw.get("norm_output", False)
    model_type = cfg.get("model_type", "llama")
    failure = _not_in(
        model_type,
        SPECULATORS_ARCH,
        "transformer_layer_config.model_type",
        f"ValueError: Unsupported model_type {model_type} for Eagle3 speculator",
        "vllm/transformers_utils/configs/speculators/algos.py L43-45",
    )
    if failure:
        failures.append(failure)
    else:
        cfg["architectures"] = [SPECULATORS_ARCH[model_type]]
    if raw.get(AUX):
        cfg[AUX] = raw[AUX]
    dropped = tuple(k for k in raw if k not in SPECULATORS_OWN and k not in ADAPTER_KEYS)
    return cfg, dropped, failures, "transformer_layer_config."


def _not_in(value, table, field: str, message: str, where: str) -> LoadFailure | None:
    """vLLM's ``value not in table`` check as a failure: ``message`` when the value is not there, and the
    ``TypeError`` the same ``in`` raises in vLLM when the value is a list or an object (unhashable)."""
    try:
        missing = value not in table
    except TypeError as exc:
        return LoadFailure(field, f"TypeError: {exc}", where)
    return LoadFailure(field, message, where) if missing else None


def _key(field: str, prefix: str, kind: str, count_key: str) -> str:
    """The config key a user edits to change ``field`` as this config is read: the aux count's own key (the
    class's first one when the count came from a list or the default); ``transformer_layer_config.`` for a
    speculators config, except the keys the adapter copies from the top level."""
    if field == "num_aux_hidden_states":
        if count_key in ("num_aux_layers", "num_aux_hidden_states"):
            return f"{prefix}{count_key}"
        return f"{prefix}{'num_aux_layers' if kind == QWEN3 else 'num_aux_hidden_states'}"
    return field if prefix and field in ADAPTER_KEYS else f"{prefix}{field}"


def _origin(cfg: dict, key: str, prefix: str, stored: Stored) -> str:
    if prefix and key in ADAPTER_KEYS and key in stored.config:
        return key
    return f"{prefix}{key}" if key in cfg else "default"


def aux_capture(cfg: dict, profile: Profile) -> tuple[tuple[int, ...] | None, str]:
    """The ids the runner passes to the target's ``set_aux_hidden_state_layers`` and the key they came from."""
    top = id_list(cfg.get(AUX))
    if top:
        return top, AUX
    nested = block(cfg, "eagle_config")
    dflash = block(cfg, "dflash_config")
    if profile.runner == MRV2:
        if dflash and id_list(dflash.get("target_layer_ids")):
            return tuple(i + 1 for i in dflash["target_layer_ids"]), "dflash_config.target_layer_ids"
        if id_list(cfg.get("dspark_target_layer_ids")):
            ids = cfg["dspark_target_layer_ids"]
            plus = 0 if cfg.get("model_type") == "deepseek_v41" else 1
            return tuple(i + plus for i in ids), "dspark_target_layer_ids"
        if id_list(cfg.get("target_layer_ids")):
            return tuple(i + 1 for i in cfg["target_layer_ids"]), "target_layer_ids"
        for name, section in (("dflash_config", dflash), ("eagle_config", nested)):
            if section and id_list(section.get("layer_ids")):
                return tuple(section["layer_ids"]), f"{name}.layer_ids"
        return None, "default"
    ids = None
    key = "default"
    if dflash and id_list(dflash.get("target_layer_ids")):
        ids, key = tuple(i + 1 for i in dflash["target_layer_ids"]), "dflash_config.target_layer_ids"
    if nested:
        ids = id_list(nested.get(AUX))
        key = f"eagle_config.{AUX}" if ids else "default"
    return ids, key


def aux_count(cfg: dict, kind: str) -> tuple[int, str]:
    """The number of aux states ``fc`` is sized for, and the key it came from."""
    nested = block(cfg, "eagle_config")
    chain: list[tuple[str, object]] = []
    if kind == QWEN3:
        chain += [("num_aux_layers", cfg.get("num_aux_layers"))]
    chain += [("num_aux_hidden_states", cfg.get("num_aux_hidden_states"))]
    for key, value in chain:
        if value is not None and int_value(value) is not None:
            return value, key  # type: ignore[return-value]
    if kind == QWEN3 and id_list(cfg.get(AUX)):
        return len(cfg[AUX]), AUX
    ids = nested.get(AUX)
    if ids:
        return len(ids), f"eagle_config.{AUX}"
    return 3, "default"


def verifier_error(stored: Stored, profile: Profile) -> str | None:
    """M2: from 0.33, ``vllm serve DRAFTER`` takes the target from ``speculators_config.verifier.name_or_path``
    and accepts only a Hub repo id that is not a local path (``transformers_utils/config.py`` L800-875)."""
    block = stored.config.get("speculators_config")
    if not isinstance(block, dict) or not profile.at_least("0.33.0"):
        return None
    verifier = block.get("verifier")
    name = verifier.get("name_or_path") if isinstance(verifier, dict) else None
    if not isinstance(name, str):
        return f"verifier.name_or_path is {name!r}: vllm serve DRAFTER raises 'Speculators verifier must name a remote model repository'"
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        return f"verifier.name_or_path {name!r} is not a Hub repo id: vllm serve DRAFTER raises 'Speculators verifier must name a remote model repository'"
    from pathlib import Path

    if Path(name).exists():
        return f"verifier.name_or_path {name!r} exists as a local path, which vllm serve DRAFTER refuses"
    return None


def _cls(cfg: dict, prefix: str, failures: list[LoadFailure], notes: list[str]) -> tuple[str, str | None]:
    """(layer kind, the class vLLM builds or ``None``): the MTP rewrite of some model types, then the registry."""
    archs = cfg.get("architectures")
    arch = first_architecture(cfg)
    guess = MLA if "kv_lora_rank" in cfg else LLAMA
    model_type = cfg.get("model_type")
    mtp = MTP_REWRITES.get(model_type) if isinstance(model_type, str) and not prefix else None
    if mtp is not None:
        failures.append(
            LoadFailure(
                "model_type",
                f"ValidationError: model_type {model_type!r}: vLLM rewrites the draft config into an MTP "
                f"model ({mtp}) and the eagle3 method names its class Eagle3{mtp}, which vLLM does not have",
                "vllm/config/speculative.py L711-800 (hf_config_override), "
                "vllm/transformers_utils/configs/eagle.py L55-63",
            )
        )
        return DRAFTER_CLASSES.get(arch or "", (guess, None))[0], None
    kind, cls = DRAFTER_CLASSES.get(arch or "", (None, None))
    if cls is None:
        # vLLM prefixes a target class (LlamaForCausalLM → Eagle3LlamaForCausalLM) when method is eagle3
        # (transformers_utils/configs/eagle.py L59-64); a name it cannot resolve fails at model construction
        renamed = arch if arch is None or arch.startswith("Eagle3") or arch.endswith("Eagle3") else f"Eagle3{arch}"
        kind, cls = DRAFTER_CLASSES.get(renamed or "", (None, None))
        if cls is not None:
            notes.append(f"architectures {arch!r} is a target class: vLLM builds {renamed} from it")
    if kind is None:
        failures.append(
            LoadFailure(
                "architectures",
                f"vLLM has no EAGLE-3 drafter class for architectures {archs!r}",
                "vllm/model_executor/models/registry.py L698-707",
            )
        )
        return guess, None
    return kind, cls


def read(stored: Stored, profile: Profile, target: ServedTarget | None = None) -> Reading:
    """vLLM ``profile``'s reading of the drafter (module docstring for the rules)."""
    target = target or ServedTarget()
    cfg, dropped, failures, prefix = engine_config(stored, profile)
    notes: list[str] = []
    kind, cls = _cls(cfg, prefix, failures, notes)
    dims = config_dims(cfg, CLASS_DEFAULTS[kind] if not prefix else {}, kind)
    if dims.target_hidden_null:
        failures.append(
            null_target_hidden(
                "vllm/model_executor/models/llama_eagle3.py L218-221",
                "getattr finds the key, so hidden_size is not used",
            )
        )
    layers = dims.num_hidden_layers
    use_aux = block(cfg, "eagle_config").get("use_aux_hidden_state", True) is not False
    A, a_key = aux_count(cfg, kind)
    attention_bias = cfg.get("attention_bias", False) is True
    o_proj_bias = attention_bias or bool(cfg.get("bias", False))
    if kind == QWEN3:
        o_proj_bias = False
    Vd = dims.draft_vocab_size
    target_vocab = target.vocab_size or dims.vocab_size
    vocab_map = (Vd is not None and Vd != target_vocab) if profile.at_least("0.30.0") else True
    quant = cfg.get("quantization_config")
    qmethod = quant.get("quant_method") if isinstance(quant, dict) else None
    mpe = dims.max_position_embeddings
    if target.max_model_len and mpe is not None and mpe < target.max_model_len:
        if not profile.at_least("0.33.0") or dims.rope_type in CACHE_ONLY_ROPE:
            notes.append(
                f"max_position_embeddings {mpe} is raised to the target's max_model_len {target.max_model_len}"
            )
            mpe = target.max_model_len
    capture, capture_key = aux_capture(cfg, profile)
    windows = (None,) * layers if kind == MLA else tuple(attention_windows(cfg, min(layers, 4096)))
    lay = class_layout(
        dims,
        A,
        Vd,
        qkv_bias=attention_bias,
        o_bias=o_proj_bias,
        mlp_bias=cfg.get("mlp_bias") is True,
        fc_norm=cfg.get("fc_norm") is True,
        fc=use_aux,
        d2t=vocab_map,
        qk_norm=kind == QWEN3,
    )
    params = expected_params(lay, kind) if cls is not None else None
    loader = {
        "norm_before_fc": dims.norm_before_fc,
        "use_aux_hidden_state": use_aux,
        "quantization": qmethod,
    }
    weights = weight_fates(stored, params, loader)
    if params is not None and lay.sized and qmethod is None:
        # a quantization config gives the linear layers other parameters (packed weights, scales): their
        # shapes are the quantization method's, not compared here
        weights, wrong = check_shapes(
            weights,
            stored.tensors,
            built_params(lay),
            cls=cls or "",
            key=lambda field: _key(field, prefix, kind, a_key),
            cites=SHAPE_CITES,
        )
        failures += wrong
    origin = {
        "num_aux_hidden_states": a_key
        if a_key == "default" or a_key.startswith("eagle_config")
        else f"{prefix}{a_key}",
        "aux_layer_ids": capture_key,
        "target_hidden_size": _origin(cfg, "target_hidden_size", prefix, stored),
        "draft_vocab_size": _origin(cfg, "draft_vocab_size", prefix, stored),
        "max_position_embeddings": _origin(cfg, "max_position_embeddings", prefix, stored),
        "attention_bias": _origin(cfg, "attention_bias", prefix, stored),
    }
    return assemble(
        profile,
        dims,
        architecture=first_architecture(cfg),
        model_class=cls,
        layer_kind=kind,
        num_aux_hidden_states=A,
        max_position_embeddings=mpe,
        aux_layer_ids=capture,
        aux_convention="C-in",
        aux_lists=aux_lists(stored.config),
        fc_norm=cfg.get("fc_norm") is True,
        norm_before_residual=cfg.get("norm_before_residual", False) is True,
        attention_bias=attention_bias,
        mlp_bias=cfg.get("mlp_bias") is True,
        fc_bias=False,
        vocab_map=vocab_map,
        tie_word_embeddings=False,
        sliding_windows=windows,
        quantization=qmethod,
        parameter_names=params,
        weights=weights,
        failures=tuple(failures),
        dropped_keys=dropped,
        verifier_error=verifier_error(stored, profile),
        origin=origin,
        notes=tuple(notes),
    )
