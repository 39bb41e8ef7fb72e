"""The plan's production ``vllm serve`` line, the verify run's ``LLM(...)`` arguments and the vLLM rules a plan
states (the rest is :mod:`eaglehub.plan.launch`'s).

The serve line runs the target at its own context (``max_position_embeddings``, or ``--context``) on the whole
machine, on the layout the target's publisher documents for a large MoE target (:func:`eaglehub.plan.rules.
publisher_rule`; tensor parallelism on one node, data + expert parallelism across nodes), else the smallest
one that holds a sequence of that context. Its KV cache is paged: vLLM needs room for one full-length
sequence, and every running sequence shares the token budget left (``kv_tokens_capacity``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from eaglehub.plan import rules
from eaglehub.plan.hints import HintInputs
from eaglehub.plan.rules import Layout
from eaglehub.plan.sizing import (
    GIB,
    MAX_SUGGESTED_NODES,
    MP,
    OVERHEAD_BYTES,
    RAY,
    Footprint,
    Machine,
    candidate,
    check_requested,
    completed,
    kv_room,
    layout_dict,
    replica_layouts,
    requested_layout,
    would_fit,
)

VLLM_DEFAULT_UTILIZATION = 0.92
"""``gpu_memory_utilization``'s default in vLLM 0.33.0 (``config/cache.py`` L215): the line omits it then."""
BLOCK = 256
"""A context cut to fit is rounded down to a multiple of this."""


def needs_remote_code(config: dict) -> bool:
    """A config with ``auto_map`` names classes of the checkpoint's own code: vLLM loads them (and the
    tokenizer that goes with them) only with ``--trust-remote-code``."""
    inner = config.get("text_config")
    inner = inner if isinstance(inner, dict) else {}
    return bool(config.get("auto_map") or inner.get("auto_map"))


def rules_section(fp: Footprint, release) -> dict:
    relays = rules.relays_aux_over_pp(fp.config)
    arch = (rules.architectures(fp.config) or ["?"])[0]
    decoder = rules.RELAY_DECODERS.get(arch)
    pp_rule = (
        f"the target alone (no --drafter): no EAGLE-3 rule applies; {arch} "
        + (
            f"runs with PP in vLLM {rules.VLLM_VERSION} ({rules.PP_ALONE[arch]})"
            if arch in rules.PP_ALONE
            else "is not among the models eaglehub knows vLLM runs with PP (config/model.py L1570-1576): no PP"
        )
        if not fp.eagle3
        else f"{arch}'s decoder ({decoder[0]}, vLLM {rules.VLLM_VERSION} {decoder[1]}) relays EAGLE-3 aux hidden "
        "states across pipeline stages: PP is allowed"
        if decoder
        else f"{arch}'s decoder does not relay EAGLE-3 aux hidden states across pipeline stages in vLLM "
        f"{rules.VLLM_VERSION} (v1/worker/gpu/spec_decode/eagle/eagle3_utils.py L57-63): no PP"
    )
    return {
        "vllm_version": rules.VLLM_VERSION,
        "pp_with_eagle3": relays,
        "pp_rule": pp_rule,
        "moe": rules.is_moe(fp.cfg),
        "publisher": rules.publisher_rule(fp.config),
        "trust_remote_code": needs_remote_code(fp.config),
        "overhead": f"{OVERHEAD_BYTES / GIB:g} GiB a GPU: CUDA graphs on (no enforce_eager), activations, "
        "CUDA context and communication buffers",
    }


def llm_arguments(fp: Footprint, drafter, run: dict, target_path: Path, k: int, release) -> dict:
    """The ``LLM(...)`` arguments eaglehub's vLLM engine builds for the verify run, CUDA graphs on (no
    ``enforce_eager``: GPU timings as served), its KV cache the run's sequences at full length, at most what
    the usable memory holds and at least one sequence (vLLM's minimum)."""
    from eaglehub.engines.base import RunSpec
    from eaglehub.engines.release import check_engine_args, check_speculative_config
    from eaglehub.engines.vllm_engine import build_request, llm_kwargs

    lay = run["layout"]
    options: dict = {"tensor_parallel_size": lay["tp"], "pipeline_parallel_size": lay["pp"]}
    options["max_num_seqs"] = run["max_num_seqs"]
    if lay["backend"] == RAY:
        options["distributed_executor_backend"] = RAY
    if needs_remote_code(fp.config):
        options["trust_remote_code"] = True
    per_gpu = run["per_gpu"]
    per_token = (per_gpu["kv_cache_bytes"] + per_gpu["drafter_kv_cache_bytes"]) / run["max_model_len"]
    tokens = max(run["max_model_len"], min(run["kv_tokens_capacity"], run["max_num_seqs"] * run["max_model_len"]))
    kv_bytes = max(1, math.ceil(tokens * per_token / 2**20)) * 2**20  # whole MiB: vLLM sizes blocks from it
    spec = RunSpec(
        target=Path(target_path),
        drafter=drafter.path if drafter else None,
        k=k,
        dtype=fp.dtype,
        max_model_len=run["max_model_len"],
        engine_options=options,
    )
    kwargs = llm_kwargs(
        build_request(spec, [], [], kv_bytes), per_request_metrics=release.per_request_metrics, enforce_eager=False
    )
    check_engine_args(kwargs, release, "LLM(...)")
    if "speculative_config" in kwargs:
        check_speculative_config(kwargs["speculative_config"], release)
    return kwargs


def serve_layouts(fp: Footprint, machine: Machine) -> tuple[list[Layout], str]:
    """The layouts a serve line tries, in order, and where the preference comes from."""
    per, total = machine.gpus, machine.gpus * machine.nodes
    if not rules.is_moe(fp.cfg):
        why = "the smallest layout vLLM 0.33 accepts that holds a sequence of the target's context (a dense target: "
        return replica_layouts(fp, machine), why + "more throughput is more such servers)"
    source = rules.publisher_rule(fp.config) or rules.DEFAULT_MOE_RULE
    tps = [t for t in (2**i for i in range(8)) if t <= total and fp.cfg["num_attention_heads"] % t == 0]
    node_tp = max([t for t in tps if t <= per], default=1)
    node = Layout(node_tp, backend=MP if node_tp > 1 else "uni")
    out = [node]
    if machine.nodes > 1:  # the whole machine: experts over every GPU, else TP across the nodes, else one node
        across = [Layout(t, nodes=math.ceil(t / per), backend=RAY) for t in tps if t > per]
        out = [Layout(1, dp=total, ep=True, nodes=machine.nodes, backend=MP), *across, node]
    out = [lay for lay in out if rules.refusal(lay, fp.config, fp.cfg, per, offline=False, eagle3=fp.eagle3) is None]
    return out, source


def serve_plan(fp, drafter, machine, report, target_path, serve_len, serve_seqs, release, hints_in) -> dict:
    """The serve section (module doc). ``hints_in``: what a refusal's hint command is made of
    (:class:`HintInputs`)."""
    desired = serve_len or fp.cfg.get("max_position_embeddings") or report["verify_run"]["max_model_len"]
    out: dict = {
        "label": "the serve line: a production vllm serve line for the whole machine, at the target's context",
        "max_model_len": desired,
        "max_num_seqs": serve_seqs,
        "candidates": [],
        "layout": None,
        "source": None,
        "per_gpu": None,
        "kv_tokens_capacity": None,
        "full_length_sequences": None,
        "k_schedule": None,
        "serve_command": None,
        "serve_has_drafter": drafter is not None,
        "notes": [],
        "refusal": None,
    }
    requested = report["requested"] or {}
    if requested:
        lay = requested_layout(requested, machine, fp)
        why = check_requested(fp, lay, machine, offline=False)
        if why:
            out["refusal"] = {
                "message": f"the requested layout is refused: {why}",
                "hint": serve_hint(fp, drafter, machine, desired, bool(requested), hints_in),
                "would_fit": None,
            }
            return out
        layouts, out["source"] = [lay], "the layout asked for" + completed(requested, lay)
    else:
        layouts, out["source"] = serve_layouts(fp, machine)
    best = None
    for lay in layouts:
        c = candidate(fp, drafter, lay, machine, desired)
        out["candidates"].append(c)
        if c["fits"]:
            best = (lay, c)
            break
        if c["kv_tokens"] >= BLOCK and (best is None or c["kv_tokens"] > best[1]["kv_tokens"]):
            best = (lay, c)
    if best is None or (not best[1]["fits"] and serve_len):
        closest = min(out["candidates"], key=lambda c: c["per_gpu"]["total_bytes"], default=None)
        need = ""
        if closest:  # the figures of a layout that was tried, named
            tried = Layout(closest["tp"], closest["pp"], closest["dp"], closest["ep"])
            need = f": the closest, {tried.text()}, needs {closest['per_gpu']['total_bytes'] / GIB:.1f} GiB a GPU"
        out["refusal"] = {
            "message": f"no serve layout holds one {desired}-token sequence on {machine.where()}{need} > "
            f"{machine.usable_bytes / GIB:.1f} GiB usable",
            "hint": serve_hint(fp, drafter, machine, desired, bool(requested), hints_in),
            "would_fit": None,
        }
        return out
    lay, c = best
    if not c["fits"]:
        cut = c["kv_tokens"] // BLOCK * BLOCK
        out["notes"].append(
            f"the target's {desired} tokens do not fit beside the weights on {lay.text()}: the line serves {cut} "
            "(vLLM refuses a max_model_len whose one sequence does not fit: kv_cache_planning.py L151-186)"
        )
        out["max_model_len"] = cut
        c = candidate(fp, drafter, lay, machine, cut)
    capacity, _ = kv_room(fp, drafter, lay, machine)
    length = out["max_model_len"]
    out.update(
        layout=layout_dict(lay),
        per_gpu=c["per_gpu"],
        kv_tokens_capacity=capacity,
        full_length_sequences=capacity // length,
        k_schedule=k_schedule(lay, report["k"]) if drafter is not None else None,
        serve_command=command(fp, drafter, machine, lay, length, serve_seqs, target_path, report, release),
    )
    if serve_seqs:
        out["notes"].append(
            f"{serve_seqs} sequences at once share {capacity:,} tokens of KV: {capacity // serve_seqs:,} tokens each "
            f"on average ({capacity // length} at the full {length})"
        )
    if lay.dp > 1:
        out["notes"].append(
            f"each of the {lay.dp} data-parallel replicas has its own KV budget: {capacity:,} tokens "
            f"({capacity // length} full-length sequences), {lay.dp * capacity:,} tokens in all"
            + (
                ""
                if rules.is_moe(fp.cfg)
                else f"; a dense target's replicas run as independent engines behind one API server (vLLM "
                f"{rules.VLLM_VERSION} v1/engine/core.py L1546-1554)"
            )
        )
    if lay.nodes > 1:
        out["notes"].append(
            "start Ray on every node first (ray start --head on the node that runs the line, ray start "
            "--address=HEAD_IP:6379 on the others)"
        )
    return out


def serve_hint(fp, drafter, machine: Machine, length: int, asked: bool, h: HintInputs) -> str:
    """A dry run that serves where this one is refused: the layout the plan chooses on this machine (a layout
    was asked for), else the fewest GPUs of this memory that hold a ``length``-token sequence, else the
    longest ``--context`` this machine holds (one the real run takes: at most the target's limit less the
    output, since it is at most the context asked for)."""
    if asked:
        layouts, _ = serve_layouts(fp, machine)
        if any(candidate(fp, drafter, lay, machine, length)["fits"] for lay in layouts):
            return h.line(machine)
    would = would_fit(fp, drafter, machine, length)
    if would:
        return h.line(replace(machine, gpus=would["gpus"] // would["nodes"], nodes=would["nodes"]))
    if h.context:
        layouts, _ = serve_layouts(fp, machine)
        room = max((kv_room(fp, drafter, lay, machine)[0] for lay in layouts), default=0)
        shorter = room // BLOCK * BLOCK - h.extra
        if shorter > 0:
            return h.line(machine, context=shorter)
    return f"no layout of up to {MAX_SUGGESTED_NODES} nodes of {machine.gpus} such GPUs holds it: a smaller target"


def k_schedule(lay: Layout, k: int) -> str:
    if lay.dp > 1:
        return (
            f"data parallel (DP {lay.dp}): vLLM {rules.VLLM_VERSION} switches a per-batch-size k schedule "
            f"(num_speculative_tokens_per_batch_size) off and drafts k = {k} at every batch size "
            "(config/vllm.py L1862, L1110-1124)"
        )
    return f"one replica: a k schedule (num_speculative_tokens_per_batch_size) would apply; this line drafts k = {k}"


def command(fp, drafter, machine, lay, length, seqs, target_path, report, release) -> str:
    from eaglehub.engines.vllm_engine import serve_command
    from eaglehub.target import hub_id

    options: dict = {"tensor_parallel_size": lay.tp}
    if lay.pp > 1:
        options["pipeline_parallel_size"] = lay.pp
    if lay.dp > 1:
        options["data_parallel_size"] = lay.dp
        if lay.nodes > 1:  # Ray starts the ranks on the other nodes from this one line
            options.update(data_parallel_size_local=machine.gpus // (lay.tp * lay.pp), data_parallel_backend=RAY)
    if lay.ep:
        options["enable_expert_parallel"] = True
    if lay.backend == RAY:
        options["distributed_executor_backend"] = RAY
    options.update(dtype=fp.dtype, max_model_len=length)
    if seqs:
        options["max_num_seqs"] = seqs
    if machine.utilization != VLLM_DEFAULT_UTILIZATION:
        options["gpu_memory_utilization"] = machine.utilization
    if needs_remote_code(fp.config):
        options["trust_remote_code"] = True
    # local paths absolute, Hub ids as given: the line pastes from any directory
    shown_drafter = (drafter.path.absolute() if Path(drafter.spec).exists() else drafter.spec) if drafter else None
    target = report["target"]
    # a Hub id as given; an eaglehub name (``smollm2``: no Hub id vLLM knows) as the directory it resolved to
    shown_target = target if not Path(target).exists() and hub_id(target) == target else Path(target_path).absolute()
    return serve_command(shown_target, shown_drafter, report["k"], options, release)
