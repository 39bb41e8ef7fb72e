"""Sliding-window checks: the per-layer windows a drafter's config gives vLLM, and the declared windows
it does not apply (F15; docs/formats.md §10)."""

from __future__ import annotations

from eaglehub.checks.context import Context, set_command
from eaglehub.drafter.canonical import SLIDING, attention_windows, int_field, window_setting
from eaglehub.findings import Finding, finding


def _positive_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def check(ctx: Context) -> list[Finding]:
    """Per-layer sliding windows as vLLM applies them to the drafter's layers (F15; docs/formats.md §10).

    E-WINDOW-INVALID: ``layer_types`` that is not a list of ``"sliding_attention"`` /
    ``"full_attention"`` covering every drafter layer (vLLM's Llama layer asserts on a short list), or a
    sliding layer whose ``sliding_window`` is not a positive integer. W-SLIDING-WINDOW: a window the
    config declares that vLLM does not apply (a Qwen3 config class without ``use_sliding_window``, the
    window only next to a speculators ``transformer_layer_config``). I-WINDOW-APPLIED: the windows applied.
    """
    d = ctx.drafter
    cfg, layers = d.config, d.dims.layers
    raw_types = cfg.get("layer_types")
    out: list[Finding] = []
    if "layer_types" in cfg:
        entries = raw_types if isinstance(raw_types, list) else []
        bad = not isinstance(raw_types, list) or any(t not in (SLIDING, "full_attention") for t in entries)
        if bad or len(entries) < layers:
            out.append(
                finding(
                    "E-WINDOW-INVALID",
                    "layer_types",
                    f"layer_types is {raw_types!r}; vLLM reads one entry per drafter layer ({layers}), each "
                    "'sliding_attention' or 'full_attention'",
                    "give one entry per drafter layer: "
                    + set_command(
                        ctx,
                        "layer_types",
                        [SLIDING if _positive_int(cfg.get("sliding_window")) else "full_attention"] * layers,
                    ),
                )
            )
            return out
    window, types = window_setting(cfg)
    # over the declared entries, not range(layers): a hostile num_hidden_layers must not cost a loop of that size
    sliding = [i for i, t in enumerate((types or [])[:layers]) if t == SLIDING]
    declared = cfg.get("sliding_window")
    if sliding and window is None and _positive_int(declared) and cfg.get("model_type") == "qwen3":
        out.append(
            finding(
                "W-SLIDING-WINDOW",
                "use_sliding_window",
                f"layer_types makes layer(s) {sliding} sliding with sliding_window {declared}, but use_sliding_window "
                f"is {cfg.get('use_sliding_window')!r}: transformers' Qwen3Config then clears the window and vLLM "
                "runs full attention",
                "if the drafter was trained with the window: " + set_command(ctx, "use_sliding_window", True),
            )
        )
    elif sliding and not _positive_int(window):
        out.append(
            finding(
                "E-WINDOW-INVALID",
                "sliding_window",
                f"sliding_window is {declared!r} while layer_types makes layer(s) {sliding} sliding: vLLM needs a "
                "positive number of positions",
                "set the window the drafter was trained with: " + set_command(ctx, "sliding_window", "<positions>"),
            )
        )
    elif _positive_int(declared) and not sliding and cfg.get("model_type") != "qwen3" and "layer_types" not in cfg:
        if cfg.get("use_sliding_window") is True:
            out.append(
                finding(
                    "W-SLIDING-WINDOW",
                    "use_sliding_window",
                    f"use_sliding_window is true (window {declared}) but this config class reads only layer_types: "
                    "vLLM runs the drafter with full attention",
                    "if the drafter was trained with the window: "
                    + set_command(ctx, "layer_types", [SLIDING] * layers),
                )
            )
    elif _positive_int(window) and not sliding and cfg.get("model_type") == "qwen3" and "layer_types" not in cfg:
        first = int_field(cfg, "max_window_layers")
        out.append(
            finding(
                "W-SLIDING-WINDOW",
                "max_window_layers",
                f"sliding_window {window} with use_sliding_window true, but no layer_types and max_window_layers "
                f"{first if first is not None else '28 (the default)'} >= the drafter's {layers} layer(s): no drafter "
                "layer gets the window",
                "if the drafter was trained with the window: " + set_command(ctx, "layer_types", [SLIDING] * layers),
            )
        )
    top = (d.carried.get("speculators") or {}).get("top_window_keys")
    if top:
        out.append(
            finding(
                "W-SLIDING-WINDOW",
                next(iter(top)),
                f"{', '.join(f'{k} {v!r}' for k, v in top.items())} sit next to transformer_layer_config, where vLLM "
                "does not read them: the drafter runs with full attention",
                "move them into transformer_layer_config if the drafter was trained with the window "
                "(eaglehub convert writes them there)",
            )
        )
    applied = attention_windows(cfg) if sliding else []  # no sliding entry: nothing applied, no per-layer list
    if any(w is not None for w in applied):
        limit = int_field(cfg, "max_position_embeddings")
        out.append(
            finding(
                "I-WINDOW-APPLIED",
                "layer_types",
                "vLLM applies sliding windows to the drafter's layers: "
                + ", ".join(f"layer {i}: {w if w is not None else 'full'}" for i, w in enumerate(applied))
                + (f" (max_position_embeddings {limit})" if limit else ""),
                "nothing to fix: the reference engine applies the same windows; eaglehub diagnose --contexts 0,2048,4096 "
                "measures acceptance past them",
            )
        )
    return out
