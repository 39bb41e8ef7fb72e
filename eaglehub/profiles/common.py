"""What both engines' readers share: the dimensions their drafter classes read alike from a config, the aux
lists a config stores, and the :class:`~eaglehub.profiles.reading.Reading` each reader ends in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eaglehub.drafter.canonical import DEFAULT_RMS_NORM_EPS
from eaglehub.profiles.config import block, id_list, int_value, rope
from eaglehub.profiles.reading import LoadFailure, Reading
from eaglehub.profiles.registry import Profile
from eaglehub.profiles.shapes import Layout, layout

AUX = "eagle_aux_hidden_state_layer_ids"


@dataclass(frozen=True)
class ConfigDims:
    """The config values vLLM's and SGLang's Llama-style drafter classes read the same way: ``None`` for a
    dimension the config gives no usable value for. ``target_hidden_size`` is ``getattr`` / ``hasattr``
    in both: a stored null stays ``None`` (``target_hidden_null``) and ``None * A`` raises ``TypeError``."""

    hidden_size: int | None
    num_attention_heads: int | None
    num_key_value_heads: int | None
    head_dim: int | None
    intermediate_size: int | None
    vocab_size: int | None
    draft_vocab_size: int | None
    num_hidden_layers: int
    rms_norm_eps: float
    rope_type: str
    rope_theta: float | None
    max_position_embeddings: int | None
    norm_before_fc: bool
    norm_output: bool
    target_hidden_size: int | None
    target_hidden_null: bool


def config_dims(cfg: dict, defaults: dict, kind: str) -> ConfigDims:
    """``cfg`` as the engine's config object holds it; ``defaults``: the transformers class defaults an
    absent key falls back on (``{}`` where the config object is not a transformers class)."""

    def get(key: str):
        return cfg[key] if key in cfg else defaults.get(key)

    H = int_value(get("hidden_size"))
    nh = int_value(get("num_attention_heads"))
    V = int_value(get("vocab_size"))
    Vd_raw = cfg.get("draft_vocab_size")
    eps = cfg.get("rms_norm_eps")
    rtype, theta = rope(cfg, kind)
    nested = block(cfg, "eagle_config")
    null_ht = "target_hidden_size" in cfg and cfg["target_hidden_size"] is None
    return ConfigDims(
        hidden_size=H,
        num_attention_heads=nh,
        num_key_value_heads=int_value(get("num_key_value_heads")) or nh,
        head_dim=int_value(cfg.get("head_dim"))
        or int_value(defaults.get("head_dim"))
        or (H // nh if H and nh else None),
        intermediate_size=int_value(get("intermediate_size")),
        vocab_size=V,
        # both classes default draft_vocab_size to vocab_size when absent or null
        draft_vocab_size=int_value(Vd_raw) if Vd_raw is not None else V,
        num_hidden_layers=int_value(get("num_hidden_layers")) or 1,
        rms_norm_eps=float(eps)
        if isinstance(eps, (int, float)) and not isinstance(eps, bool)
        else DEFAULT_RMS_NORM_EPS,
        rope_type=rtype,
        rope_theta=theta,
        max_position_embeddings=int_value(get("max_position_embeddings")),
        # the nested eagle_config value first (vLLM llama_eagle3.py L184-188, SGLang llama_eagle3.py L173-175)
        norm_before_fc=bool(nested.get("norm_before_fc", cfg.get("norm_before_fc", False))),
        norm_output=cfg.get("norm_output") is True,
        target_hidden_size=int_value(cfg["target_hidden_size"]) if "target_hidden_size" in cfg else H,
        target_hidden_null=null_ht,
    )


def first_architecture(cfg: dict) -> str | None:
    """``architectures[0]`` when it is a string (what the engines' registries look up)."""
    archs = cfg.get("architectures")
    return archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None


def null_target_hidden(cite: str, why: str) -> LoadFailure:
    return LoadFailure(
        "target_hidden_size",
        f"TypeError: target_hidden_size is null, and None * num_aux_hidden_states has no value ({why})",
        cite,
    )


def aux_lists(raw: dict) -> dict[str, tuple[int, ...]]:
    """The aux-layer id lists the drafter's own config stores, by key (top level, nested ``eagle_config``)."""
    out = {}
    if id_list(raw.get(AUX)):
        out[AUX] = tuple(raw[AUX])
    nested = raw.get("eagle_config")
    if isinstance(nested, dict) and id_list(nested.get(AUX)):
        out[f"eagle_config.{AUX}"] = tuple(nested[AUX])
    return out


def class_layout(dims: ConfigDims, num_aux: int | None, draft_vocab: int | None, **built: bool) -> Layout:
    """The :class:`~eaglehub.profiles.shapes.Layout` of a Llama-style class sized by ``dims``, with the
    reader's own aux count and head rows, and ``built`` saying which optional parameters its class has."""
    return layout(
        hidden_size=dims.hidden_size,
        target_hidden_size=dims.target_hidden_size,
        num_aux_hidden_states=num_aux,
        num_attention_heads=dims.num_attention_heads,
        num_key_value_heads=dims.num_key_value_heads,
        head_dim=dims.head_dim,
        intermediate_size=dims.intermediate_size,
        vocab_size=dims.vocab_size,
        draft_vocab_size=draft_vocab,
        num_hidden_layers=min(dims.num_hidden_layers, 4096),
        norm_before_fc=dims.norm_before_fc,
        **built,
    )


def assemble(profile: Profile, dims: ConfigDims, **fields: Any) -> Reading:
    """The :class:`Reading`: the profile, ``dims`` for every dimension the reader does not override, and
    the reader's own ``fields`` (class, aux count and capture, flags, weights, failures...)."""
    values: dict[str, Any] = {
        "profile": profile.id,
        "engine": profile.engine,
        "hidden_size": dims.hidden_size,
        "target_hidden_size": dims.target_hidden_size,
        "num_attention_heads": dims.num_attention_heads,
        "num_key_value_heads": dims.num_key_value_heads,
        "head_dim": dims.head_dim,
        "intermediate_size": dims.intermediate_size,
        "vocab_size": dims.vocab_size,
        "draft_vocab_size": dims.draft_vocab_size,
        "num_hidden_layers": dims.num_hidden_layers,
        "rms_norm_eps": dims.rms_norm_eps,
        "norm_before_fc": dims.norm_before_fc,
        "norm_output": dims.norm_output,
        "max_position_embeddings": dims.max_position_embeddings,
        "rope_type": dims.rope_type,
        "rope_theta": dims.rope_theta,
    }
    values.update(fields)
    return Reading(**values)
