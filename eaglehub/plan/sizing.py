"""What a layout costs on the fullest GPU (:mod:`eaglehub.plan.launch` chooses layouts from these): the machine
as vLLM sees it, the target's footprint, weights / drafter / overhead / paged KV bytes a GPU, and the replica
layouts vLLM 0.33 accepts (:mod:`eaglehub.plan.rules`) in the order the verify run tries them."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from eaglehub.constants import DEFAULT_GPU_MEMORY_UTILIZATION
from eaglehub.plan import memory, rules
from eaglehub.plan.cards import GIB
from eaglehub.plan.rules import Layout

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
    eagle3: bool = True
    """Served with an EAGLE-3 drafter: the EAGLE-3 layout rules apply (the target alone is not held to them)."""

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
    relays = rules.pp_allowed(fp.config, fp.eagle3)
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
    return [lay for lay in out if rules.refusal(lay, fp.config, fp.cfg, per, offline=True, eagle3=fp.eagle3) is None]


def requested_layout(want: dict, machine: Machine, fp: Footprint | None = None) -> Layout:
    """The layout the user's options name, the backend given or what the GPUs need. A partial layout
    (pipeline, expert or data parallelism without a TP) is completed over the machine as vLLM's MoE
    deployments run it: TP over the GPUs a replica has on a node (the largest TP the target allows there),
    replicas to fill the machine with EP (DP x TP x PP = its GPUs; ``--data-parallel-size`` given: TP over the
    GPUs each replica has); EP with a TP and no DP gets the replicas that fill the machine. Otherwise what is
    not given is 1."""
    tp, pp, dp = (int(want.get(k) or 1) for k in ("tp", "pp", "dp"))
    per, total = machine.gpus, machine.gpus * machine.nodes
    if fp is not None and not want.get("tp") and (want.get("dp") or want.get("ep") or want.get("pp")):
        replicas = dp if want.get("dp") else max(1, total // min(per * pp, total))
        tp = max(_tps(fp, min(per, total // (replicas * pp))), default=1)
        dp = replicas if want.get("dp") else max(1, total // (tp * pp))
    elif want.get("ep") and not want.get("dp"):
        dp = max(1, total // (tp * pp))
    nodes = math.ceil(tp * pp * dp / machine.gpus)
    replica_nodes = math.ceil(tp * pp / machine.gpus)
    backend = want.get("backend") or (RAY if replica_nodes > 1 else (MP if tp * pp > 1 else UNI))
    return Layout(tp, pp, dp, bool(want.get("ep")), nodes, backend)


def check_requested(fp: Footprint, lay: Layout, machine: Machine, offline: bool) -> str | None:
    """Why the requested layout cannot run here: more GPUs than the machine has, or a vLLM 0.33 rule."""
    have = machine.gpus * machine.nodes
    if lay.gpus > have:
        return f"{lay.text()} needs {lay.gpus} GPUs; the machine has {have} ({machine.where()})"
    return rules.refusal(lay, fp.config, fp.cfg, machine.gpus, offline, eagle3=fp.eagle3)


def completed(requested: dict, lay: Layout) -> str:
    """What the planner added to a partial layout request (:func:`eaglehub.plan.sizing.requested_layout`)."""
    why = {"tp": f"TP {lay.tp} over the GPUs a replica has", "dp": f"DP {lay.dp}: replicas filling the machine"}
    added = [text for key, text in why.items() if not requested.get(key) and getattr(lay, key) > 1]
    return f", completed to {lay.text()} ({'; '.join(added)})" if added else ""


def would_fit(fp: Footprint, drafter: Drafter | None, machine: Machine, tokens: int) -> dict | None:
    """The fewest GPUs of this memory that fit, by the same rule on nodes of eight (or of the given
    GPUs per node, when more)."""
    bigger = replace(machine, gpus=max(machine.gpus, MAX_SUGGESTED_TP), nodes=MAX_SUGGESTED_NODES)
    for lay in replica_layouts(fp, bigger):
        if per_gpu(fp, drafter, lay, tokens)["total_bytes"] <= machine.usable_bytes:
            return {"tp": lay.tp, "pp": lay.pp, "gpus": lay.gpus, "nodes": lay.nodes}
    return None
