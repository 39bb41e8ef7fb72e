"""Launch plans for a target (+ EAGLE-3 drafter) on given GPUs (schemas/launch-plan.schema.json): two labelled
things, each on a layout vLLM 0.33 accepts (:mod:`eaglehub.plan.rules`):

- the **verify run**: what ``eaglehub verify`` runs (``LLM(...)``, verify's ``max_model_len`` and sequences, one
  replica) on the fewest GPUs: on one node the smallest TP whose fullest GPU fits, then TP x PP where the
  target relays EAGLE-3 aux states across stages, then several nodes over Ray (TP x PP, or TP across nodes);
- the **serve line** (:mod:`eaglehub.plan.serve`): a ``vllm serve`` line for production on the whole machine,
  at the target's context.

Memory is vLLM's: the usable share of each GPU's CUDA total (:mod:`eaglehub.plan.cards`); weights, the
drafter (split by TP, vLLM's default draft TP), CUDA-graph and activation overhead, and a paged KV cache that
must hold one ``max_model_len`` sequence (vLLM 0.33.0 ``v1/core/kv_cache_planning.py`` L151-186: "To serve
at least one request with the model's max seq len"); what is left is the KV token budget all sequences
share. A layout the user asks for is used or refused with the numbers.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from eaglehub.plan import memory, rules
from eaglehub.plan.cards import GB, GIB
from eaglehub.plan.hints import HintInputs
from eaglehub.plan.rules import Layout
from eaglehub.plan.sizing import (
    MAX_SUGGESTED_NODES,
    OVERHEAD_BYTES,
    RAY,
    Drafter,
    Footprint,
    Machine,
    candidate,
    check_requested,
    completed,
    footprint,
    kv_room,
    layout_dict,
    replica_layouts,
    requested_layout,
    would_fit,
)

__all__ = ["GB", "GIB", "OVERHEAD_BYTES", "Drafter", "Machine", "plan_launch"]


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


def search(fp, drafter, machine, layouts, max_model_len, tokens) -> tuple[list[dict], dict | None]:
    """Try ``layouts`` in order at KV for ``tokens`` tokens: the candidates tried and the first that fits."""
    tried = []
    for lay in layouts:
        c = candidate(fp, drafter, lay, machine, tokens)
        tried.append(c)
        if c["fits"]:
            return tried, c
    return tried, None


def plan_launch(
    config: dict,
    machine: Machine,
    *,
    target_spec: str,
    target_path: Path,
    index_bytes: int | None = None,
    drafter: Drafter | None = None,
    k: int = 3,
    max_model_len: int = 2048,
    max_num_seqs: int = 1,
    dtype: str | None = None,
    hint: HintInputs | None = None,
    release=None,
    requested: dict | None = None,
    serve_len: int | None = None,
    serve_seqs: int | None = None,
) -> dict:
    """The launch-plan report for ``config`` on ``machine`` (schemas/launch-plan.schema.json).

    ``max_model_len`` / ``max_num_seqs``: the verify run's; ``serve_len``: the serve line's context (default:
    the target's ``max_position_embeddings``), ``serve_seqs`` its ``--max-num-seqs`` (default: vLLM's).
    ``requested``: the layout options given (``tp``, ``pp``, ``dp``, ``ep``, ``backend``), used or refused.
    ``index_bytes``: ``metadata.total_size`` of the target's index; ``hint``: what the ``eaglehub verify``
    line of a refusal's hint is made of; ``release``: the vLLM release the lines are written for. Without a
    drafter the target is planned alone: no EAGLE-3 layout rule, no k, no draft tokens in its lengths.

    Raises:
        EaglehubError: the release lacks an option or method the plan needs (exit 1).
    """
    from eaglehub.engines.release import release as release_for
    from eaglehub.io.schemas import check_output
    from eaglehub.plan import serve

    release = release or release_for(None)
    hint = hint or HintInputs(target_spec)
    fp = replace(footprint(config, dtype, index_bytes), eagle3=drafter is not None)
    requested = {key: v for key, v in (requested or {}).items() if v}
    report = {
        "target": target_spec,
        "model_type": str(config.get("model_type") or fp.cfg.get("model_type") or ""),
        "architecture": next(iter(rules.architectures(config)), None),
        "attention": "mla" if memory.is_mla(fp.cfg) else "gqa",
        "dtype": fp.dtype,
        "quantization": {
            "scheme": fp.quant.scheme,
            "bytes_per_param": round(fp.quant.bytes_per_param, 6),
            "exclude": list(fp.quant.exclude),
        },
        "params": _params(fp),
        "weights_bytes": {
            "computed": round(fp.computed_bytes),
            "index": index_bytes,
            "used": "index" if fp.index_bytes else "computed",
        },
        "kv_bytes_per_token": int(memory.kv_bytes_per_token(fp.cfg, fp.dtype_bytes, 1)),
        "k": k if drafter is not None else None,
        "drafter": {"spec": drafter.spec, "path": str(drafter.path), "weight_bytes": drafter.weight_bytes}
        if drafter
        else None,
        "machine": {
            "gpus_per_node": machine.gpus,
            "nodes": machine.nodes,
            "gpu_memory_bytes": machine.total_bytes,
            "card": machine.card,
            "read_as": machine.read_as,
            "utilization": machine.utilization,
            "usable_bytes": int(machine.usable_bytes),
            "source": machine.source,
        },
        "vllm_rules": serve.rules_section(fp, release),
        "requested": requested or None,
        "verify_run": verify_run(fp, drafter, machine, max_model_len, max_num_seqs, requested, hint),
        "serve": None,
        "fits": False,
        "profile": release.section(),
        "drafter_check": None,
    }
    run = report["verify_run"]
    if run["layout"] is not None:
        run["llm_kwargs"] = serve.llm_arguments(fp, drafter, run, target_path, k, release)
    report["serve"] = serve.serve_plan(fp, drafter, machine, report, target_path, serve_len, serve_seqs, release, hint)
    report["fits"] = run["layout"] is not None and report["serve"]["layout"] is not None
    check_output(report, "launch-plan", "launch plan")
    return report


def _params(fp: Footprint) -> dict:
    quantized = sum(w.params for w in fp.weights if w.bytes_per_param != fp.dtype_bytes)
    total = sum(w.params for w in fp.weights)
    return {"total": total, "quantized": quantized, "unquantized": total - quantized}


def verify_run(fp, drafter, machine, max_model_len, max_num_seqs, requested, hint: HintInputs) -> dict:
    """The verify run's section: its settings, the layouts tried, the one chosen (or the refusal)."""
    run: dict = {
        "label": "the verify run: what eaglehub verify runs (LLM(...), one replica, the fewest GPUs)",
        "max_model_len": max_model_len,
        "max_num_seqs": max_num_seqs,
        "candidates": [],
        "layout": None,
        "reason": None,
        "per_gpu": None,
        "headroom_bytes": None,
        "kv_tokens_capacity": None,
        "llm_kwargs": None,
        "refusal": None,
    }
    asked = {key: requested[key] for key in ("tp", "pp", "backend") if key in requested}
    if asked:
        lay = requested_layout(asked, machine, fp)
        why = check_requested(fp, lay, machine, offline=True)
        if why:
            _, auto = search(fp, drafter, machine, replica_layouts(fp, machine), max_model_len, max_model_len)
            run["refusal"] = {
                "message": f"the requested layout is refused: {why}",
                "hint": _layout_hint(auto, machine, hint),
                "would_fit": None,
            }
            return run
        layouts = [lay]
    else:
        layouts = replica_layouts(fp, machine)
    run["candidates"], chosen = search(fp, drafter, machine, layouts, max_model_len, max_model_len)
    if chosen is None:
        run["refusal"] = refusal(fp, drafter, machine, run, hint, bool(asked))
        return run
    lay = Layout(chosen["tp"], chosen["pp"], nodes=chosen["nodes"], backend=chosen["backend"])
    capacity, _ = kv_room(fp, drafter, lay, machine)
    rejected = [c for c in run["candidates"][:-1] if c["pp"] == 1 and c["nodes"] == 1]
    why = "; ".join(f"TP {c['tp']} needs {_gib(c['per_gpu']['total_bytes'])}" for c in rejected)
    reason = (
        f"{lay.text()} as asked" + completed(asked, lay)
        if asked
        else f"{lay.text()} on {lay.nodes} node(s) is the smallest layout vLLM 0.33 accepts that fits"
        + (" (workers on other nodes through Ray)" if lay.backend == RAY else "")
    )
    if why:
        reason += f" ({why} > {_gib(machine.usable_bytes)} usable)"
    run.update(
        layout=layout_dict(lay),
        reason=reason,
        per_gpu=chosen["per_gpu"],
        headroom_bytes=int(machine.usable_bytes - chosen["per_gpu"]["total_bytes"]),
        kv_tokens_capacity=capacity,
    )
    return run


def _layout_hint(auto: dict | None, machine, hint: HintInputs) -> str:
    """For a requested layout that is refused: the same dry run with the layout the plan itself chooses on
    this machine (a command that works), or, where none fits, what to change."""
    if auto is None:
        return "no layout vLLM 0.33 accepts fits this machine: give more GPUs (--gpus / --nodes)"
    pp = f" --pipeline-parallel-size {auto['pp']}" if auto["pp"] > 1 else ""
    return hint.line(machine, f" --tensor-parallel-size {auto['tp']}{pp}")


def refusal(fp, drafter, machine, run, hint: HintInputs, asked: bool) -> dict:
    """Nothing fits: the numbers of the layout that came closest, the longest context it holds, and the
    fewest GPUs of this memory that would fit (:func:`would_fit`)."""
    tried = run["candidates"]
    if not tried:
        return {
            "message": "no layout vLLM 0.33 accepts fits these GPUs",
            "hint": "give more GPUs (--gpus)",
            "would_fit": None,
        }
    closest = min(tried, key=lambda c: c["per_gpu"]["total_bytes"])
    g, tokens = closest["per_gpu"], run["max_model_len"]
    parts = f"weights {_gib(g['weights_bytes'])} + KV {_gib(g['kv_cache_bytes'])} ({tokens} tokens)"
    if drafter:
        parts += f" + drafter {_gib(g['drafter_bytes'] + g['drafter_kv_cache_bytes'])}"
    usable = f"{_gib(machine.usable_bytes)} usable ({machine.utilization:g} x {_gib(machine.total_bytes)})"
    lay = Layout(closest["tp"], closest["pp"], nodes=closest["nodes"], backend=closest["backend"])
    message = (
        f"{hint.target} does not fit on {machine.where()}: at {lay.text()} each GPU needs {parts} + overhead "
        f"{_gib(g['overhead_bytes'])} = {_gib(g['total_bytes'])} > {usable}; the weights alone are "
        f"{_gib(fp.computed_bytes * fp.scale)}"
    )
    if closest["kv_tokens"]:
        message += f"; at most {closest['kv_tokens']} tokens of context fit there"
    would = None if asked else would_fit(fp, drafter, machine, tokens)
    hint_line = (
        "drop the layout options and let the plan choose, or give more GPUs (--gpus / --nodes)"
        if asked
        else f"no layout of up to {MAX_SUGGESTED_NODES} such nodes fits"
    )
    if would:
        hint_line = hint.line(replace(machine, gpus=would["gpus"] // would["nodes"], nodes=would["nodes"]))
        message += f"; the fewest such GPUs that fit: {would['gpus']} ({Layout(would['tp'], would['pp']).text()})"
    return {"message": message, "hint": hint_line, "would_fit": would}
