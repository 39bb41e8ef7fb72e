"""SGLang's reading of an EAGLE-3 drafter (SGLang 0.5.23; files under ``sglang/srt/``).

- Config: transformers' class for ``model_type``; there is no speculators reader, so a speculators
  checkpoint (no top-level ``model_type``) does not load. Classes: ``LlamaForCausalLMEagle3``
  (``models/llama_eagle3.py`` L387) and ``Eagle3DeepseekV2ForCausalLM`` (``models/kimi_k25_eagle3.py``
  L523); no Qwen3-style EAGLE-3 class.
- Llama: ``fc`` reads ``target_hidden_size`` (``hasattr``: a stored null is ``None`` and fails) times
  ``num_aux_hidden_states`` → nested id count → 3, with a bias when ``bias`` is set (L151-167);
  ``norm_before_fc`` nested-first (L169-175); ``fc_norm`` or ``use_aux_norm`` (L185-187); the decoder's
  q/k/v have no bias whatever ``attention_bias`` says (L72); ``tie_word_embeddings`` makes ``lm_head``
  the embedding, the trained head unused (L300-314); config windows are ignored, the server's
  ``--speculative-draft-window-size`` applies (L286-299); unknown weight names are skipped (L325-385).
- MLA (Kimi-K2.5): the aux count is the length of the nested, else top-level id list, else 3 (L48-59).
- The target captures the nested ``eagle_config.eagle_aux_hidden_state_layer_ids`` only, each id plus one
  (C-out: the output of layer i); none gives ``[2, N//2, N-3]`` in input-of-layer terms
  (``model_executor/model_runner_components/spec_aux_hidden_state.py`` L185-196, ``models/llama.py``
  L929-941).
"""

from __future__ import annotations

from eaglehub.drafter.canonical import DEFAULT_RMS_NORM_EPS, LLAMA, MLA
from eaglehub.profiles.checkpoint import ServedTarget, Stored
from eaglehub.profiles.config import CLASS_DEFAULTS, block, id_list, int_value, rope
from eaglehub.profiles.reading import ACCEPTED, IGNORED, SKIPPED, LoadFailure, Reading, WeightFate
from eaglehub.profiles.registry import Profile
from eaglehub.profiles.vllm import AUX

#: ``architectures[0]`` → (layer kind, SGLang class)
DRAFTER_CLASSES = {
    "LlamaForCausalLMEagle3": (LLAMA, "LlamaForCausalLMEagle3"),
    "Eagle3DeepseekV2ForCausalLM": (MLA, "Eagle3DeepseekV2ForCausalLM"),
}


def read(stored: Stored, profile: Profile, target: ServedTarget | None = None) -> Reading:
    cfg = stored.config
    failures: list[LoadFailure] = []
    archs = cfg.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    if cfg.get("speculators_config") is not None:
        failures.append(
            LoadFailure(
                "speculators_config",
                "SGLang has no speculators reader: the checkpoint has no top-level model_type or drafter class",
                "sglang/srt/models/ (no speculators config class)",
            )
        )
    kind, cls = DRAFTER_CLASSES.get(arch or "", ("", None))
    if cls is None:
        failures.append(
            LoadFailure(
                "architectures",
                f"SGLang has no EAGLE-3 drafter class for architectures {archs!r} (it has LlamaForCausalLMEagle3 "
                "and Eagle3DeepseekV2ForCausalLM)",
                "sglang/srt/models/llama_eagle3.py L387, kimi_k25_eagle3.py L523",
            )
        )
        kind = MLA if "kv_lora_rank" in cfg else LLAMA
    defaults = CLASS_DEFAULTS[kind]

    def get(key: str):
        return cfg[key] if key in cfg else defaults.get(key)

    H = int_value(get("hidden_size"))
    nh = int_value(get("num_attention_heads"))
    V = int_value(get("vocab_size"))
    Vd = int_value(cfg.get("draft_vocab_size")) if cfg.get("draft_vocab_size") is not None else V
    layers = int_value(get("num_hidden_layers")) or 1
    nested = block(cfg, "eagle_config")
    if kind == MLA:
        ids = nested.get(AUX)
        if ids is None:
            ids = cfg.get(AUX)
        A, a_key = (3, "default") if ids is None else (len(ids), f"eagle_config.{AUX}" if AUX in nested else AUX)
    elif int_value(cfg.get("num_aux_hidden_states")) is not None:
        A, a_key = cfg["num_aux_hidden_states"], "num_aux_hidden_states"
    elif nested.get(AUX):
        A, a_key = len(nested[AUX]), f"eagle_config.{AUX}"
    else:
        A, a_key = 3, "default"
    if "target_hidden_size" in cfg:
        Ht = int_value(cfg["target_hidden_size"])
        if cfg["target_hidden_size"] is None:
            failures.append(
                LoadFailure(
                    "target_hidden_size",
                    "TypeError: target_hidden_size is null (hasattr finds the key, so hidden_size is not used)",
                    "sglang/srt/models/llama_eagle3.py L151-167",
                )
            )
    else:
        Ht = H
    nbf = bool(nested.get("norm_before_fc", cfg.get("norm_before_fc", False)))
    tie = cfg.get("tie_word_embeddings") is True
    rtype, theta = rope(cfg, kind)
    eps = cfg.get("rms_norm_eps")
    eps_f = float(eps) if isinstance(eps, (int, float)) and not isinstance(eps, bool) else DEFAULT_RMS_NORM_EPS
    capture = id_list(nested.get(AUX))
    aux_lists = {}
    if id_list(cfg.get(AUX)):
        aux_lists[AUX] = tuple(cfg[AUX])
    if capture:
        aux_lists[f"eagle_config.{AUX}"] = capture
    weights = []
    for name in stored.tensors:
        if "d2t" in name:
            weights.append(WeightFate(name, ACCEPTED, "hot_token_id", "d2t becomes the hot-token map"))
        elif "t2d" in name:
            weights.append(WeightFate(name, SKIPPED, None, "t2d is not read"))
        elif tie and "lm_head" in name:
            weights.append(
                WeightFate(name, IGNORED, None, "tie_word_embeddings: lm_head is the embedding, this head is unused")
            )
        else:
            weights.append(
                WeightFate(name, ACCEPTED, None, "loaded, or skipped without a word when the name is unknown")
            )
    quant = block(cfg, "quantization_config")
    notes = []
    if tie:
        notes.append("tie_word_embeddings: SGLang uses embed_tokens as lm_head (the trained head is not loaded)")
    return Reading(
        profile=profile.id,
        engine=profile.engine,
        architecture=arch,
        model_class=cls,
        layer_kind=kind,
        hidden_size=H,
        target_hidden_size=Ht,
        num_aux_hidden_states=A,
        num_attention_heads=nh,
        num_key_value_heads=int_value(get("num_key_value_heads")) or nh,
        head_dim=int_value(cfg.get("head_dim"))
        or int_value(defaults.get("head_dim"))
        or (H // nh if H and nh else None),
        intermediate_size=int_value(get("intermediate_size")),
        vocab_size=V,
        draft_vocab_size=Vd,
        num_hidden_layers=layers,
        rms_norm_eps=eps_f,
        aux_layer_ids=capture,
        aux_convention="C-out",
        aux_lists=aux_lists,
        fc_norm=bool(cfg.get("fc_norm") or cfg.get("use_aux_norm")),
        norm_output=cfg.get("norm_output") is True,
        norm_before_fc=nbf,
        norm_before_residual=cfg.get("norm_before_residual", False) is True,
        attention_bias=False,
        mlp_bias=cfg.get("mlp_bias") is True,
        fc_bias=cfg.get("bias") is True,
        vocab_map=stored.has("d2t"),
        tie_word_embeddings=tie,
        sliding_windows=(None,) * min(layers, 4096),
        max_position_embeddings=int_value(get("max_position_embeddings")),
        rope_type=rtype,
        rope_theta=theta,
        quantization=quant.get("quant_method"),
        parameter_names=None,
        weights=tuple(weights),
        failures=tuple(failures),
        origin={"num_aux_hidden_states": a_key, "aux_layer_ids": f"eagle_config.{AUX}" if capture else "default"},
        notes=tuple(notes),
    )
