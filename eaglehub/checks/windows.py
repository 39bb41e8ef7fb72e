"""Sliding-window checks: the per-layer windows a drafter's config gives vLLM, and the declared windows
it does not apply (F15; docs/formats.md §10)."""

from __future__ import annotations

from eaglehub.checks.context import Context, set_command
from eaglehub.checks.holds import Said, holding
from eaglehub.drafter.canonical import SLIDING, attention_windows, int_field, window_setting
from eaglehub.drafter.shapes import MLA
from eaglehub.findings import Finding, finding
from eaglehub.profiles.reading import Reading
from eaglehub.profiles.registry import VLLM


def _positive_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _reads_windows(r: Reading) -> bool:
    """The profile takes windows from the config: vLLM's Llama and Qwen3 layers (0.33.0 model_executor/models/
    llama.py L185-204, per layer from layer_types, as 0.32.0); not vLLM's MLA drafter, not SGLang, which takes
    the server's --speculative-draft-window-size only (srt/models/llama_eagle3.py L286-299)."""
    return r.engine == VLLM and r.layer_kind != MLA and r.model_class is not None


def _full(r: Reading) -> bool:
    """The profile builds the drafter and applies no window to any layer."""
    return r.model_class is not None and not any(w is not None for w in r.sliding_windows)


#: the judged profiles each finding holds for: a malformed field matters where windows are read from the
#: config, a declared window left unapplied wherever the drafter runs with full attention, the applied windows
#: where they are applied (a profile that ignores declared windows is W-ENGINE-WINDOW's, checks/profiles.py)
_HOLDS = {
    "E-WINDOW-INVALID": _reads_windows,
    "W-SLIDING-WINDOW": _full,
    "I-WINDOW-APPLIED": lambda r: any(w is not None for w in r.sliding_windows),
}


def check(ctx: Context) -> list[Finding]:
    """The findings of :func:`_check`, each naming the judged profiles it holds for (:data:`_HOLDS`); a malformed
    field with no profile judged that reads it stays a finding about the config."""
    out = []
    for f in _check(ctx):
        alone = f.message if f.code == "E-WINDOW-INVALID" else None
        out += holding(ctx, [Said(f.code, f.subject, f.message, f.hint)], _HOLDS[f.code], alone)
    return out


def _check(ctx: Context) -> list[Finding]:
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
                "runs full attention (SGLang takes no window from the config)",
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
                    "vLLM runs the drafter with full attention (SGLang takes no window from the config)",
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
                "layer gets the window (SGLang takes no window from the config)",
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
                "does not read them: the drafter runs with full attention (SGLang takes no window from the config)",
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
