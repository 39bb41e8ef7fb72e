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

import math
from dataclasses import dataclass, replace
from pathlib import Path

from eaglehub.constants import DEFAULT_GPU_MEMORY_UTILIZATION
from eaglehub.plan import memory, rules
from eaglehub.plan.cards import GB, GIB
from eaglehub.plan.rules import Layout

__all__ = ["GB", "GIB", "OVERHEAD_BYTES", "Drafter", "Machine", "plan_launch"]

OVERHEAD_BYTES = 4 * GIB
"""Per GPU beyond weights and KV cache, with CUDA graphs on (vLLM's default, which GPU plans keep): CUDA
context, NCCL and other non-torch memory (about 1 GiB), the activation peak of vLLM's start-up profile run
(about 2 GiB) and the CUDA graph pool (about 1 GiB), which vLLM 0.33 profiles and takes out of the KV
budget (``v1/worker/gpu_worker.py`` L707-757). Published vLLM start-up logs show 0.07-1.4 GiB non-torch,
2-6 GiB activation peak and 0.7-4.1 GiB of graphs, the high ends for large MoE targets at long batches: a
stated margin, not a measurement; the KV budget a plan reports is what is left after it."""
MAX_SUGGESTED_TP = 8
MAX_SUGGESTED_NODES = 16
UNI, MP, RAY = "uni", "mp", "ray"


@dataclass
class Machine:
    """``gpus`` per node on ``nodes`` nodes, each GPU with ``total_bytes`` as CUDA reports it (vLLM requests
    ``utilization`` of it: vLLM 0.33.0 ``v1/worker/utils.py`` L724-726)."""

    gpus: int
    total_bytes: int
    nodes: int = 1
    utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION
    source: str = "options"
    card: str | None = None
    read_as: str = ""

    @property
    def usable_bytes(self) -> float:
        return self.total_bytes * self.utilization

    def where(self) -> str:
        what = self.card.upper() if self.card else f"{self.total_bytes / GIB:.2f} GiB"
        return f"{self.nodes} node{'s' if self.nodes > 1 else ''} of {self.gpus} x {what}"


@dataclass
class Drafter:
    """The drafter as given (``spec``: a directory or Hub id), its local directory, weight bytes and config."""

    spec: str
    path: Path
    weight_bytes: int
    config: dict


@dataclass
class Footprint:
    config: dict
    cfg: dict
    weights: list[memory.Weight]
    dtype: str
    dtype_bytes: int
    quant: memory.Quantization
    computed_bytes: float
    index_bytes: int | None

    @property
    def scale(self) -> float:
        """Index bytes over computed bytes: the computed split, scaled to the checkpoint's exact size."""
        return self.index_bytes / self.computed_bytes if self.index_bytes else 1.0


def footprint(config: dict, dtype: str | None, index_bytes: int | None) -> Footprint:
    """The target's weights at compute ``dtype`` (default: the config's). The index's ``total_size`` is
    used only when the compute dtype is the checkpoint's: otherwise unquantized weights change size."""
    from eaglehub.errors import InputError

    cfg = memory.text_config(config)
    stored = memory.config_dtype(cfg)
    dtype = dtype or stored
    if dtype not in memory.DTYPE_BYTES:
        raise InputError(f"the target's dtype {dtype} has no known size", hint="pass --dtype bfloat16")
    size = memory.DTYPE_BYTES[dtype]
    quant = memory.quantization(cfg)
    ws = memory.price(memory.weights(cfg), quant, size)
    computed = sum(w.params * w.bytes_per_param for w in ws)
    same = memory.DTYPE_BYTES.get(stored) == size
    return Footprint(config, cfg, ws, dtype, size, quant, computed, index_bytes if same else None)


def _has_attention(cfg: dict) -> bool:
    return all(isinstance(cfg.get(k), int) for k in ("num_hidden_layers", "num_attention_heads", "hidden_size"))


def kv_per_token(fp: Footprint, drafter: Drafter | None, lay: Layout) -> float:
    """KV bytes one token takes on the fullest GPU: the target's layers of the fullest stage at the layout's
    TP, plus the drafter's layer (at the same TP, vLLM's default draft TP)."""
    layers = fp.cfg["num_hidden_layers"]
    share = max(memory.stage_layers(layers, lay.pp)) / layers
    kv = memory.kv_bytes_per_token(fp.cfg, fp.dtype_bytes, lay.tp) * share
    if drafter is not None:
        d_cfg = memory.text_config(drafter.config)
        kv += memory.kv_bytes_per_token(d_cfg, fp.dtype_bytes, lay.tp) if _has_attention(d_cfg) else 0.0
    return kv


def per_gpu(fp: Footprint, drafter: Drafter | None, lay: Layout, tokens: int) -> dict:
    """The fullest GPU's bytes with KV for ``tokens`` tokens."""
    ep = lay.tp * lay.dp if lay.ep else 0
    weights = memory.rank_bytes(fp.weights, fp.cfg, lay.tp, lay.pp, ep) * fp.scale
    d_weights = drafter.weight_bytes / lay.tp if drafter is not None else 0.0
    per_token = kv_per_token(fp, drafter, lay)
    d_share = per_token - kv_per_token(fp, None, lay)
    kv, d_kv = (per_token - d_share) * tokens, d_share * tokens
    total = weights + d_weights + kv + d_kv + OVERHEAD_BYTES
    return {
        "weights_bytes": round(weights),
        "kv_cache_bytes": round(kv),
        "drafter_bytes": round(d_weights),
        "drafter_kv_cache_bytes": round(d_kv),
        "overhead_bytes": OVERHEAD_BYTES,
        "total_bytes": round(total),
    }


def kv_room(fp: Footprint, drafter: Drafter | None, lay: Layout, machine: Machine) -> tuple[int, float]:
    """``(tokens of KV the usable memory holds beside the rest, bytes per token)`` on the fullest GPU."""
    fixed = per_gpu(fp, drafter, lay, 0)["total_bytes"]
    per_token = kv_per_token(fp, drafter, lay)
    room = machine.usable_bytes - fixed
    return (int(room // per_token) if room > 0 and per_token else 0), per_token


def candidate(fp: Footprint, drafter: Drafter | None, lay: Layout, machine: Machine, tokens: int) -> dict:
    g = per_gpu(fp, drafter, lay, tokens)
    capacity, _ = kv_room(fp, drafter, lay, machine)
    return {**layout_dict(lay), "per_gpu": g, "fits": g["total_bytes"] <= machine.usable_bytes, "kv_tokens": capacity}


def layout_dict(lay: Layout) -> dict:
    return {
        "tp": lay.tp,
        "pp": lay.pp,
        "dp": lay.dp,
        "ep": lay.ep,
        "nodes": lay.nodes,
        "gpus": lay.gpus,
        "backend": lay.backend,
    }


def _tps(fp: Footprint, top: int) -> list[int]:
    return [t for t in (2**i for i in range(8)) if t <= top and memory.tp_allowed(fp.cfg, t)]


def replica_layouts(fp: Footprint, machine: Machine) -> list[Layout]:
    """One replica's layouts in the order the verify run tries them (module doc), each one vLLM 0.33 accepts."""
    per, total = machine.gpus, machine.gpus * machine.nodes
    relays = rules.relays_aux_over_pp(fp.config)
    layers = fp.cfg["num_hidden_layers"]
    in_node = _tps(fp, per)
    out = [Layout(t, backend=UNI if t == 1 else MP) for t in in_node]
    if relays:
        pairs = [(t, p) for t in in_node for p in range(2, per // t + 1) if p <= layers]
        out += [Layout(t, p, backend=MP) for t, p in sorted(pairs, key=lambda tp: (tp[0] * tp[1], tp[1]))]
    if machine.nodes > 1 and in_node:
        if relays:
            top = in_node[-1]
            pps = range(per // top + 1, total // top + 1)
            out += [Layout(top, p, nodes=math.ceil(top * p / per), backend=RAY) for p in pps if p <= layers]
        else:  # no stages: tensor parallelism across nodes (Moonshot's TP 16 on two nodes)
            out += [Layout(t, nodes=math.ceil(t / per), backend=RAY) for t in _tps(fp, total) if t > per]
    return [lay for lay in out if rules.refusal(lay, fp.config, fp.cfg, per, offline=True) is None]


def requested_layout(want: dict, machine: Machine) -> Layout:
    """The layout the user's options name: TP / PP / DP given or 1, the backend given or what the GPUs need."""
    tp, pp, dp = (int(want.get(k) or 1) for k in ("tp", "pp", "dp"))
    nodes = math.ceil(tp * pp * dp / machine.gpus)
    replica_nodes = math.ceil(tp * pp / machine.gpus)
    backend = want.get("backend") or (RAY if replica_nodes > 1 else (MP if tp * pp > 1 else UNI))
    return Layout(tp, pp, dp, bool(want.get("ep")), nodes, backend)


def check_requested(fp: Footprint, lay: Layout, machine: Machine, offline: bool) -> str | None:
    """Why the requested layout cannot run here: more GPUs than the machine has, or a vLLM 0.33 rule."""
    have = machine.gpus * machine.nodes
    if lay.gpus > have:
        return f"{lay.text()} needs {lay.gpus} GPUs; the machine has {have} ({machine.where()})"
    return rules.refusal(lay, fp.config, fp.cfg, machine.gpus, offline)


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
    command: str = "",
    release=None,
    requested: dict | None = None,
    serve_len: int | None = None,
    serve_seqs: int | None = None,
) -> dict:
    """The launch-plan report for ``config`` on ``machine`` (schemas/launch-plan.schema.json).

    ``max_model_len`` / ``max_num_seqs``: the verify run's; ``serve_len``: the serve line's context (default:
    the target's ``max_position_embeddings``), ``serve_seqs`` its ``--max-num-seqs`` (default: vLLM's).
    ``requested``: the layout options given (``tp``, ``pp``, ``dp``, ``ep``, ``backend``), used or refused.
    ``index_bytes``: ``metadata.total_size`` of the target's index; ``command``: the options of the
    ``eaglehub verify`` line, for hints; ``release``: the vLLM release the lines are written for.

    Raises:
        EaglehubError: the release lacks an option or method the plan needs (exit 1).
    """
    from eaglehub.engines.release import release as release_for
    from eaglehub.io.schemas import check_output
    from eaglehub.plan import serve

    release = release or release_for(None)
    fp = footprint(config, dtype, index_bytes)
    requested = {key: v for key, v in (requested or {}).items() if v}
    report = {
        "target": target_spec,
        "model_type": str(config.get("model_type") or fp.cfg.get("model_type") or ""),
        "architecture": (rules.architectures(config) or [None])[0],
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
        "k": k,
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
        "verify_run": verify_run(fp, drafter, machine, max_model_len, max_num_seqs, requested, command, target_spec),
        "serve": None,
        "fits": False,
        "profile": release.section(),
        "drafter_check": None,
    }
    run = report["verify_run"]
    if run["layout"] is not None:
        run["llm_kwargs"] = serve.llm_arguments(fp, drafter, run, target_path, k, release)
    report["serve"] = serve.serve_plan(fp, drafter, machine, report, target_path, serve_len, serve_seqs, release)
    report["fits"] = run["layout"] is not None and report["serve"]["layout"] is not None
    check_output(report, "launch-plan", "launch plan")
    return report


def _params(fp: Footprint) -> dict:
    quantized = sum(w.params for w in fp.weights if w.bytes_per_param != fp.dtype_bytes)
    total = sum(w.params for w in fp.weights)
    return {"total": total, "quantized": quantized, "unquantized": total - quantized}


def verify_run(fp, drafter, machine, max_model_len, max_num_seqs, requested, command, target_spec) -> dict:
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
        lay = requested_layout(asked, machine)
        why = check_requested(fp, lay, machine, offline=True)
        if why:
            run["refusal"] = {"message": f"the requested layout is refused: {why}", "hint": _layout_hint(), "would_fit": None}
            return run
        layouts = [lay]
    else:
        layouts = replica_layouts(fp, machine)
    run["candidates"], chosen = search(fp, drafter, machine, layouts, max_model_len, max_model_len)
    if chosen is None:
        run["refusal"] = refusal(fp, drafter, machine, run, command, target_spec, bool(asked))
        return run
    lay = Layout(chosen["tp"], chosen["pp"], nodes=chosen["nodes"], backend=chosen["backend"])
    capacity, per_token = kv_room(fp, drafter, lay, machine)
    rejected = [c for c in run["candidates"][:-1] if c["pp"] == 1 and c["nodes"] == 1]
    why = "; ".join(f"TP {c['tp']} needs {_gib(c['per_gpu']['total_bytes'])}" for c in rejected)
    reason = (
        f"{lay.text()} as asked"
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


def _layout_hint() -> str:
    return "ask for a layout vLLM accepts, or drop the layout options and let the plan choose"


def refusal(fp, drafter, machine, run, command, target_spec, asked: bool) -> dict:
    """Nothing fits: the numbers of the layout that came closest, the longest context it holds, and the
    fewest GPUs of this memory that would fit (:func:`would_fit`)."""
    tried = run["candidates"]
    if not tried:
        return {"message": "no layout vLLM 0.33 accepts fits these GPUs", "hint": "give more GPUs (--gpus)", "would_fit": None}
    closest = min(tried, key=lambda c: c["per_gpu"]["total_bytes"])
    g, tokens = closest["per_gpu"], run["max_model_len"]
    parts = f"weights {_gib(g['weights_bytes'])} + KV {_gib(g['kv_cache_bytes'])} ({tokens} tokens)"
    if drafter:
        parts += f" + drafter {_gib(g['drafter_bytes'] + g['drafter_kv_cache_bytes'])}"
    usable = f"{_gib(machine.usable_bytes)} usable ({machine.utilization:g} x {_gib(machine.total_bytes)})"
    lay = Layout(closest["tp"], closest["pp"], nodes=closest["nodes"], backend=closest["backend"])
    message = (
        f"{target_spec} does not fit on {machine.where()}: at {lay.text()} each GPU needs {parts} + overhead "
        f"{_gib(g['overhead_bytes'])} = {_gib(g['total_bytes'])} > {usable}; the weights alone are "
        f"{_gib(fp.computed_bytes * fp.scale)}"
    )
    if closest["kv_tokens"]:
        message += f"; at most {closest['kv_tokens']} tokens of context fit there"
    would = None if asked else would_fit(fp, drafter, machine, tokens)
    hint = _layout_hint() if asked else f"no layout of up to {MAX_SUGGESTED_NODES} such nodes fits"
    if would:
        nodes = f" --nodes {would['nodes']}" if would["nodes"] > 1 else ""
        memory_arg = machine.card or f"{machine.total_bytes / GIB:.2f}GiB"
        hint = (
            f"eaglehub verify --target {target_spec} --dry-run --gpus {would['gpus'] // would['nodes']} "
            f"--gpu-memory {memory_arg}{nodes}{command}"
        )
        message += f"; the fewest such GPUs that fit: {would['gpus']} ({Layout(would['tp'], would['pp']).text()})"
    return {"message": message, "hint": hint, "would_fit": would}


def would_fit(fp: Footprint, drafter: Drafter | None, machine: Machine, tokens: int) -> dict | None:
    """The fewest GPUs of this memory that fit, by the same rule on nodes of eight (or of the given
    GPUs per node, when more)."""
    bigger = replace(machine, gpus=max(machine.gpus, MAX_SUGGESTED_TP), nodes=MAX_SUGGESTED_NODES)
    for lay in replica_layouts(fp, bigger):
        if per_gpu(fp, drafter, lay, tokens)["total_bytes"] <= machine.usable_bytes:
            return {"tp": lay.tp, "pp": lay.pp, "gpus": lay.gpus, "nodes": lay.nodes}
    return None
