"""What a launch plan reads: the target's ``config.json`` (and ``model.safetensors.index.json`` when the
target has one), the drafter's weight size, and the GPUs this machine reports; then
:func:`plan_for_verify`, the ``verify --dry-run`` entry point. Never a target weight file."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, fields
from pathlib import Path

from eaglehub.constants import DEFAULT_GPU_MEMORY_UTILIZATION
from eaglehub.errors import InputError, UsageError
from eaglehub.io import jsonio
from eaglehub.plan.launch import Drafter, Machine, plan_launch

INDEX_FILE = "model.safetensors.index.json"
WEIGHT_SUFFIXES = (".safetensors", ".bin")


LAUNCH_KEYS = ("gpus", "gpu_memory", "nodes", "gpu_memory_utilization", "data_parallel_size", "enable_expert_parallel")
"""The CLI options that describe a launch plan (``verify --dry-run``)."""


@dataclass
class LaunchOptions:
    """``verify --dry-run``'s machine: GPUs per node and their memory (``--gpu-memory``: a card, GiB or GB, read
    by :func:`eaglehub.plan.cards.read_gpu_memory`; ``None``: what this machine reports), nodes, the share of
    each GPU's memory vLLM may use, and the serve line's data / expert parallelism when asked for."""

    gpus: int | None = None
    gpu_memory: str | None = None
    nodes: int = 1
    utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION
    data_parallel_size: int | None = None
    expert_parallel: bool = False

    @classmethod
    def pop_from(cls, options: dict, dry_run: bool) -> tuple[LaunchOptions | None, bool]:
        """``(the launch options or None without --dry-run, whether any was given)``, taken out of the CLI's
        keyword arguments (:data:`LAUNCH_KEYS`)."""
        given = {key: options.pop(key, None) for key in LAUNCH_KEYS}
        launch = cls(
            given["gpus"],
            given["gpu_memory"],
            given["nodes"] or 1,
            given["gpu_memory_utilization"] or DEFAULT_GPU_MEMORY_UTILIZATION,
            given["data_parallel_size"],
            bool(given["enable_expert_parallel"]),
        )
        named = launch.gpus is not None or launch.gpu_memory is not None or launch.nodes != 1
        named = named or launch.data_parallel_size is not None or launch.expert_parallel
        return (launch if dry_run else None), named


def read_target(spec: str) -> tuple[dict, Path, int | None]:
    """``(config, directory, index total_size or None)`` of target ``spec``: a local directory, or a Hub
    id through huggingface_hub's cache (:func:`eaglehub.target.resolve_target_files`).

    Raises:
        InputError: the spec names nothing readable, or its config or index is not JSON (exit 2).
    """
    from eaglehub.target import resolve_target_files

    root, found = resolve_target_files(spec, (INDEX_FILE,))
    config = _json(root / "config.json")
    index_bytes = None
    if INDEX_FILE in found:
        total = (_json(found[INDEX_FILE]).get("metadata") or {}).get("total_size")
        index_bytes = int(total) if isinstance(total, (int, float)) and total > 0 else None
    return config, root, index_bytes


def _json(path: Path) -> dict:
    try:
        value = jsonio.read(path)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {path} as JSON: {exc}", hint="check the file") from exc
    if not isinstance(value, dict):
        raise InputError(f"{path} is not a JSON object", hint="check the file")
    return value


def read_drafter(spec: str) -> Drafter:
    """The drafter's directory (a path, or a Hub id through :func:`eaglehub.io.source.resolve_source`),
    the bytes of its weight files and its config."""
    from eaglehub.io.source import resolve_source

    root, _ = resolve_source(spec)
    files = [p for p in Path(root).iterdir() if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES)]
    if not files:
        raise InputError(f"drafter {spec} has no weight files", hint="pass an EAGLE-3 drafter directory")
    config = _json(Path(root) / "config.json") if (Path(root) / "config.json").is_file() else {}
    return Drafter(spec, Path(root).resolve(), sum(p.stat().st_size for p in files), config)


def machine(opts: LaunchOptions) -> Machine:
    """The GPUs to plan for: the options, with what torch reports for this machine filling the unset ones.

    Raises:
        UsageError: an unreadable --gpu-memory, or an option is unset and this machine reports no GPU (exit 2).
    """
    from eaglehub.plan.cards import read_gpu_memory

    given = read_gpu_memory(opts.gpu_memory) if opts.gpu_memory is not None else None
    if opts.gpus is not None and given is not None:
        return Machine(opts.gpus, given.total_bytes, opts.nodes, opts.utilization, "options", given.card, given.read_as)
    count, total = local_gpus()
    if not count:
        raise UsageError(
            "this machine reports no GPU to plan for",
            hint="pass the target machine's GPUs: --gpus N --gpu-memory CARD|GiB (e.g. --gpus 8 --gpu-memory H200)",
        )
    gpus = opts.gpus if opts.gpus is not None else count
    if given is not None:
        return Machine(gpus, given.total_bytes, opts.nodes, opts.utilization, "options", given.card, given.read_as)
    read_as = f"{total / 2**30:.2f} GiB: this machine's first GPU, as CUDA reports it"
    return Machine(gpus, total, opts.nodes, opts.utilization, "machine", None, read_as)


def local_gpus() -> tuple[int, int]:
    """``(CUDA devices, total bytes of the first)`` as vLLM reads them (``torch.cuda.mem_get_info``'s total,
    vLLM 0.33.0 ``utils/mem_utils.py`` L143); ``(0, 0)`` without torch or a GPU."""
    try:
        import torch
    except ImportError:
        return 0, 0
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        return 0, 0
    return torch.cuda.device_count(), int(torch.cuda.mem_get_info(0)[1])


def plan_for_verify(opts, launch: LaunchOptions, dtype: str | None) -> dict:
    """The launch plan of ``verify --dry-run`` for :class:`eaglehub.verify.options.VerifyOptions` ``opts``:
    its target, first drafter, k and the context it would run at (``--context`` with its output and
    draft tokens, at most the target's ``max_position_embeddings``; else verify's ``max_model_len``), the
    layout options given (``--tensor-parallel-size``, ``--pipeline-parallel-size``,
    ``--distributed-executor-backend``, ``--data-parallel-size``, ``--enable-expert-parallel``: used or refused)
    and ``--max-num-seqs`` (the verify run's sequences and the serve line's). ``dtype``: the compute dtype when
    given, else the checkpoint's."""
    from eaglehub.engines.release import release as release_for
    from eaglehub.measure.context import config_max_context, context_error, context_overflow, fit_context
    from eaglehub.plan.hints import HintInputs
    from eaglehub.verify.options import VerifyOptions

    if not opts.target:
        raise UsageError("--dry-run plans a target", hint="pass --target DIR or a Hub id")
    if len(opts.drafters) > 1:
        raise UsageError("--dry-run plans one drafter", hint="give one --drafter")
    if len(opts.profiles) > 1:
        raise UsageError("--dry-run plans for one vLLM release", hint="give one --profile")
    release = release_for(opts.profiles[0] if opts.profiles else None)
    config, root, index_bytes = read_target(opts.target)
    drafter = read_drafter(opts.drafters[0]) if opts.drafters else None
    max_model_len, context = opts.max_model_len, opts.context
    if context:  # the real run's rule (eaglehub.measure.padding), so the plan refuses what the run refuses
        limit = config_max_context(config)
        if opts.context_fit:
            context = fit_context(context, opts.max_tokens, limit)
        overflow = context_overflow(context, opts.max_tokens, limit)
        if overflow:
            raise context_error(opts.context, overflow, limit, opts.max_tokens)
        # the drafter's k draft tokens of the last verify pass: a target served alone has none
        need = context + opts.max_tokens + (opts.k if drafter is not None else 0)
        max_model_len = min(need, limit) if limit else need
    given_seqs = opts.engine_options.get("max_num_seqs")
    seqs = int(given_seqs or 1)
    eo = opts.engine_options
    requested = {
        "tp": eo.get("tensor_parallel_size"),
        "pp": eo.get("pipeline_parallel_size"),
        "backend": eo.get("distributed_executor_backend"),
        "dp": launch.data_parallel_size,
        "ep": launch.expert_parallel or None,
    }
    defaults = {f.name: f.default for f in fields(VerifyOptions)}
    options = "".join(
        [
            f" --drafter {shlex.quote(opts.drafters[0])}" if opts.drafters else "",
            f" -k {opts.k}" if drafter is not None and opts.k != defaults["k"] else "",
            f" --max-tokens {opts.max_tokens}" if context and opts.max_tokens != defaults["max_tokens"] else "",
            f" --max-num-seqs {seqs}" if seqs > 1 else "",
            f" --profile {release.profile.id}" if opts.profiles else "",
        ]
    )
    hint = HintInputs(opts.target, options, context, opts.max_tokens + (opts.k if drafter is not None else 0))
    report = plan_launch(
        config,
        machine(launch),
        target_spec=opts.target,
        target_path=root,
        index_bytes=index_bytes,
        drafter=drafter,
        k=opts.k,
        max_model_len=max_model_len,
        max_num_seqs=seqs,
        dtype=dtype,
        hint=hint,
        release=release,
        requested=requested,
        serve_len=max_model_len if context else None,
        serve_seqs=int(given_seqs) if given_seqs else None,
    )
    if drafter is not None:
        report["drafter_check"] = drafter_check(drafter.path, opts.target, release.profile.id)
        from eaglehub.io.schemas import check_output

        check_output(report, "launch-plan", "launch plan")
    return report


def drafter_check(drafter: Path, target: str, profile: str) -> dict:
    """The preflight a real ``verify`` run makes (:func:`eaglehub.checks.validate.preflight_report`: every weight
    read, against the target), judged for the plan's release, the one engine the plan serves: whether that
    release loads the drafter as the plan would serve it and the drafter can accept anything there, e.g. a
    ``d2t`` shipped with an unpruned vocabulary, which vLLM refuses from 0.30 on (E-ENGINE-WEIGHT), or an
    all-zero norm gain (E-TENSOR-ZERO). ``ok`` false makes the dry run exit 1."""
    from eaglehub.checks.validate import preflight_report

    report = preflight_report(drafter, target, (profile,))
    shown = [
        {k: f[k] for k in ("code", "severity", "subject", "message", "hint")}
        for f in report["findings"]
        if f["severity"] in ("error", "warning")
    ]
    return {"profile": profile, "ok": report["ok"], "counts": report["counts"], "findings": shown}


def write_plan(report: dict, path: str | Path) -> None:
    """``verify --dry-run --report FILE``: the plan as JSON, checked against its schema, written atomically.

    Raises:
        EaglehubError: schema violation, or the file cannot be written.
    """
    from eaglehub.io.schemas import write_output

    write_output(report, path, "launch-plan", "launch plan")
