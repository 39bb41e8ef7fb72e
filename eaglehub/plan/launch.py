"""Choose tensor- and pipeline-parallel sizes and vLLM's executor backend for a target (+ drafter) on
given GPUs, and build the launch-plan report (schemas/launch-plan.schema.json).

The rule (docs/verify.md, "Launch plans (--dry-run)"): on one node, the smallest TP (a power of two
that the heads allow, :func:`eaglehub.plan.memory.tp_allowed`) whose fullest GPU fits; then, on one
node, TP x PP layouts by GPU count; then, with ``nodes > 1``, the largest allowed TP and the fewest
pipeline stages that fit, on vLLM's Ray backend, which vLLM needs to start workers on other nodes.
A plan that fits nowhere is refused with the numbers of the layout that came closest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from eaglehub.constants import DEFAULT_GPU_MEMORY_UTILIZATION
from eaglehub.plan import memory

GB = 10**9
GIB = 2**30
OVERHEAD_BYTES = 3 * GIB
"""Per GPU beyond weights and KV cache: CUDA context and communication buffers (about 1 GiB) and the
activation peak of vLLM's start-up profile run (about 2 GiB at eaglehub's settings: eager mode, no CUDA
graphs). A stated margin, not a measurement."""
MAX_SUGGESTED_TP = 8
"""The largest TP suggested when the given GPUs are too few: one node of eight GPUs."""
MAX_SUGGESTED_NODES = 16


@dataclass
class Machine:
    """``gpus`` per node, each with ``gpu_memory_gb`` (10^9 bytes, as GPUs are sold), on ``nodes`` nodes."""

    gpus: int
    gpu_memory_gb: float
    nodes: int = 1
    utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION
    source: str = "options"

    @property
    def usable_bytes(self) -> float:
        return self.gpu_memory_gb * GB * self.utilization


@dataclass
class Drafter:
    """The drafter as given (``spec``: a directory or Hub id), its local directory, weight bytes and config."""

    spec: str
    path: Path
    weight_bytes: int
    config: dict


@dataclass
class Footprint:
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
    return Footprint(cfg, ws, dtype, size, quant, computed, index_bytes if same else None)


def _per_gpu(fp: Footprint, drafter: Drafter | None, tp: int, pp: int, tokens: int) -> dict:
    weights = memory.rank_bytes(fp.weights, fp.cfg, tp, pp) * fp.scale
    layers = fp.cfg["num_hidden_layers"]
    # a stage caches only its own layers' KV: the fullest stage holds ceil(layers / PP) of them
    kv_share = max(memory.stage_layers(layers, pp)) / layers
    kv = memory.kv_bytes_per_token(fp.cfg, fp.dtype_bytes, tp) * kv_share * tokens
    d_weights, d_kv = 0.0, 0.0
    if drafter is not None:
        d_weights = drafter.weight_bytes  # counted whole on every rank: an upper bound
        d_cfg = memory.text_config(drafter.config)
        d_kv = memory.kv_bytes_per_token(d_cfg, fp.dtype_bytes, tp) * tokens if _has_attention(d_cfg) else 0.0
    total = weights + kv + d_weights + d_kv + OVERHEAD_BYTES
    return {
        "weights_bytes": round(weights),
        "kv_cache_bytes": round(kv),
        "drafter_bytes": round(d_weights),
        "drafter_kv_cache_bytes": round(d_kv),
        "overhead_bytes": OVERHEAD_BYTES,
        "total_bytes": round(total),
    }


def _has_attention(cfg: dict) -> bool:
    return all(isinstance(cfg.get(k), int) for k in ("num_hidden_layers", "num_attention_heads", "hidden_size"))


def layouts(cfg: dict, machine: Machine) -> list[tuple[int, int, str]]:
    """``(tp, pp, phase)`` in the order they are tried (module doc)."""
    layers = cfg["num_hidden_layers"]
    tps = [t for t in (2**i for i in range(8)) if t <= machine.gpus and memory.tp_allowed(cfg, t)]
    out = [(t, 1, "tp") for t in tps]
    in_node = [(t, p) for t in tps for p in range(2, machine.gpus // t + 1) if p <= layers]
    out += [(t, p, "pp") for t, p in sorted(in_node, key=lambda tp_pp: (tp_pp[0] * tp_pp[1], tp_pp[1]))]
    if machine.nodes > 1 and tps:
        top = tps[-1]
        first = machine.gpus // top + 1
        out += [(top, p, "nodes") for p in range(first, machine.nodes * machine.gpus // top + 1) if p <= layers]
    return out


def _nodes(tp: int, pp: int, per_node: int) -> int:
    return math.ceil(tp * pp / per_node)


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


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
) -> dict:
    """The launch-plan report for ``config`` on ``machine`` (schemas/launch-plan.schema.json).

    ``index_bytes``: ``metadata.total_size`` of the target's ``model.safetensors.index.json`` when it has
    one (the exact weight bytes); ``command``: the options of the ``eaglehub verify`` line, for hints.
    ``release`` (:class:`eaglehub.engines.release.Release`; default: the default profile's): the vLLM release
    the ``vllm serve`` line and the ``LLM(...)`` arguments are written for, using only what it accepts.
    ``fits`` is false, ``plan`` null and ``refusal`` set when no layout fits.

    Raises:
        EaglehubError: the release lacks an option or method the plan needs (exit 1).
    """
    from eaglehub.engines.release import release as release_for
    from eaglehub.io.schemas import check_output

    release = release or release_for(None)
    fp = footprint(config, dtype, index_bytes)
    tokens = max_model_len * max_num_seqs
    candidates = []
    chosen = None
    for tp, pp, phase in layouts(fp.cfg, machine):
        per_gpu = _per_gpu(fp, drafter, tp, pp, tokens)
        fits = per_gpu["total_bytes"] <= machine.usable_bytes
        candidates.append({"tp": tp, "pp": pp, "nodes": _nodes(tp, pp, machine.gpus), "per_gpu": per_gpu, "fits": fits})
        if fits:
            chosen = (tp, pp, phase)
            break
    report = {
        "target": target_spec,
        "model_type": str(config.get("model_type") or fp.cfg.get("model_type") or ""),
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
        "max_model_len": max_model_len,
        "max_num_seqs": max_num_seqs,
        "k": k,
        "drafter": {"spec": drafter.spec, "path": str(drafter.path), "weight_bytes": drafter.weight_bytes}
        if drafter
        else None,
        "machine": {
            "gpus_per_node": machine.gpus,
            "gpu_memory_gb": machine.gpu_memory_gb,
            "gpu_memory_bytes": int(machine.gpu_memory_gb * GB),
            "nodes": machine.nodes,
            "utilization": machine.utilization,
            "usable_bytes": int(machine.usable_bytes),
            "source": machine.source,
        },
        "candidates": candidates,
        "fits": chosen is not None,
        "plan": None,
        "refusal": None,
        "profile": release.section(),
        "drafter_check": None,
    }
    if chosen is not None:
        report["plan"] = _plan(
            report, fp, drafter, chosen, target_path, k, max_model_len, max_num_seqs, machine, release
        )
    else:
        report["refusal"] = _refusal(report, fp, drafter, machine, tokens, command)
    check_output(report, "launch-plan", "launch plan")
    return report


def _params(fp: Footprint) -> dict:
    quantized = sum(w.params for w in fp.weights if w.bytes_per_param != fp.dtype_bytes)
    total = sum(w.params for w in fp.weights)
    return {"total": total, "quantized": quantized, "unquantized": total - quantized}


def _plan(report, fp, drafter, chosen, target_path, k, max_model_len, max_num_seqs, machine, release) -> dict:
    from eaglehub.engines.base import RunSpec
    from eaglehub.engines.release import check_engine_args, check_speculative_config
    from eaglehub.engines.vllm_engine import build_request, llm_kwargs, serve_command

    tp, pp, phase = chosen
    last = report["candidates"][-1]
    world, nodes = tp * pp, last["nodes"]
    backend = "ray" if nodes > 1 else ("mp" if world > 1 else "uni")
    per_gpu = last["per_gpu"]
    free = machine.usable_bytes - per_gpu["total_bytes"]
    per_token = (per_gpu["kv_cache_bytes"] + per_gpu["drafter_kv_cache_bytes"]) / (max_model_len * max_num_seqs)
    rejected = [c for c in report["candidates"][:-1] if c["pp"] == 1]
    why = "; ".join(f"TP {c['tp']} needs {_gib(c['per_gpu']['total_bytes'])}" for c in rejected)
    reason = {
        "tp": f"TP {tp} is the smallest tensor-parallel size whose fullest GPU fits on one node",
        "pp": f"no TP alone fits; TP {tp} x PP {pp} is the smallest layout on one node that fits",
        "nodes": f"nothing fits on one node; TP {tp} per node and {pp} pipeline stages over {nodes} nodes "
        "(vLLM starts workers on other nodes through Ray)",
    }[phase]
    if why:
        reason += f" ({why} > {_gib(machine.usable_bytes)} usable)"
    engine_options = {"tensor_parallel_size": tp, "pipeline_parallel_size": pp, "max_num_seqs": max_num_seqs}
    if backend == "ray":
        engine_options["distributed_executor_backend"] = "ray"
    kv_used = per_gpu["kv_cache_bytes"] + per_gpu["drafter_kv_cache_bytes"]
    kv_bytes = max(1, math.ceil(kv_used / 2**20)) * 2**20  # vLLM sizes blocks; a whole MiB is a safe floor
    spec = RunSpec(
        target=Path(target_path),
        drafter=drafter.path if drafter else None,
        k=k,
        dtype=fp.dtype,
        max_model_len=max_model_len,
        engine_options=engine_options,
    )
    kwargs = llm_kwargs(build_request(spec, [], [], kv_bytes), per_request_metrics=release.per_request_metrics)
    check_engine_args(kwargs, release, "LLM(...)")
    if "speculative_config" in kwargs:
        check_speculative_config(kwargs["speculative_config"], release)
    serve_options: dict = {
        "tensor_parallel_size": tp,
        "pipeline_parallel_size": pp,
        **({"distributed_executor_backend": "ray"} if backend == "ray" else {}),
        "dtype": fp.dtype,
        "max_model_len": max_model_len,
        "max_num_seqs": max_num_seqs,
        "gpu_memory_utilization": machine.utilization,
    }
    # local paths absolute, Hub ids as given: the line pastes from any directory (vLLM reads a path against its own)
    shown_drafter = (drafter.path.absolute() if Path(drafter.spec).exists() else drafter.spec) if drafter else None
    from eaglehub.target import hub_id

    target = report["target"]
    # a Hub id as given; an eaglehub name (``smollm2``: no Hub id vLLM knows) as the directory it resolved to
    shown_target = target if not Path(target).exists() and hub_id(target) == target else Path(target_path).absolute()
    return {
        "tp": tp,
        "pp": pp,
        "backend": backend,
        "nodes": nodes,
        "gpus": world,
        "reason": reason,
        "per_gpu": per_gpu,
        "headroom_bytes": int(free),
        "kv_tokens_capacity": int((free + kv_used) // per_token) if per_token else None,
        "serve_command": serve_command(shown_target, shown_drafter, k, serve_options, release),
        "serve_has_drafter": drafter is not None,
        "llm_kwargs": kwargs,
    }


def _refusal(report, fp, drafter, machine, tokens, command) -> dict:
    closest = min(report["candidates"], key=lambda c: c["per_gpu"]["total_bytes"]) if report["candidates"] else None
    where = f"{machine.nodes} node{'s' if machine.nodes > 1 else ''} of {machine.gpus} x {machine.gpu_memory_gb:g} GB"
    usable = f"{_gib(machine.usable_bytes)} usable ({machine.utilization:g} x {machine.gpu_memory_gb:g} GB)"
    if closest is None:
        message = f"no tensor-parallel size up to {machine.gpus} divides the target's attention heads"
        return {"message": message, "hint": "give more GPUs (--gpus)", "would_fit": None, "max_model_len_fits": None}
    g = closest["per_gpu"]
    parts = f"weights {_gib(g['weights_bytes'])} + KV {_gib(g['kv_cache_bytes'])} ({tokens} tokens)"
    if drafter:
        parts += f" + drafter {_gib(g['drafter_bytes'] + g['drafter_kv_cache_bytes'])}"
    message = (
        f"{report['target']} does not fit on {where}: at TP {closest['tp']} x PP {closest['pp']} each GPU needs "
        f"{parts} + overhead {_gib(g['overhead_bytes'])} = {_gib(g['total_bytes'])} > {usable}; "
        f"the weights alone are {_gib(fp.computed_bytes * fp.scale)}"
    )
    # the longest context the closest layout holds, when only the KV cache is too large
    rest = machine.usable_bytes - (g["total_bytes"] - g["kv_cache_bytes"] - g["drafter_kv_cache_bytes"])
    per_token = (g["kv_cache_bytes"] + g["drafter_kv_cache_bytes"]) / tokens
    fits_len = int(rest // per_token // report["max_num_seqs"]) if rest > 0 and per_token else None
    if fits_len:
        message += f"; at most {fits_len} tokens of context fit there"
    would = _would_fit(fp, drafter, machine, tokens)
    hint = f"no layout of up to {MAX_SUGGESTED_NODES} nodes of {max(machine.gpus, MAX_SUGGESTED_TP)} such GPUs fits"
    if would:
        nodes = f" --nodes {would['nodes']}" if would["nodes"] > 1 else ""
        per_node = would["gpus"] // would["nodes"]
        hint = (
            f"eaglehub verify --target {report['target']} --dry-run --gpus {per_node} "
            f"--gpu-memory {machine.gpu_memory_gb:g}{nodes}{command}"
        )
        message += (
            f"; the fewest {machine.gpu_memory_gb:g} GB GPUs that fit: {would['gpus']} "
            f"(TP {would['tp']} x PP {would['pp']})"
        )
    return {"message": message, "hint": hint, "would_fit": would, "max_model_len_fits": fits_len}


def _would_fit(fp: Footprint, drafter: Drafter | None, machine: Machine, tokens: int) -> dict | None:
    """The fewest GPUs of this memory that fit, by the same rule on nodes of eight (or of the given
    GPUs per node, when more): TP first, then stages on one node, then nodes."""
    per_node = max(machine.gpus, MAX_SUGGESTED_TP)
    bigger = Machine(per_node, machine.gpu_memory_gb, MAX_SUGGESTED_NODES, machine.utilization)
    for tp, pp, _ in layouts(fp.cfg, bigger):
        if _per_gpu(fp, drafter, tp, pp, tokens)["total_bytes"] <= machine.usable_bytes:
            return {"tp": tp, "pp": pp, "gpus": tp * pp, "nodes": _nodes(tp, pp, per_node)}
    return None
