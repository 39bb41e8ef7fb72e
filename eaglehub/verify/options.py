"""The inputs of one verify run."""

from __future__ import annotations

from dataclasses import dataclass, field

from eaglehub.measure import acceptance


@dataclass
class VerifyOptions:
    """Inputs of one verify run (see ``eaglehub verify --help`` for units and defaults)."""

    target: str
    drafters: list[str]
    k: int = 3
    max_tokens: int = 64
    prompts_file: str | None = None
    categories: list[str] = field(default_factory=list)
    limit: int | None = None
    dtype: str = "float32"
    seed: int = 0
    max_model_len: int = 2048
    reference_report: str | None = None
    al_tolerance: float = acceptance.DEFAULT_AL_TOLERANCE
    engine_options: dict = field(default_factory=dict)
    """vLLM pass-through (:attr:`RunSpec.engine_options`): ``tensor_parallel_size``,
    ``pipeline_parallel_size``, ``distributed_executor_backend``, ``max_num_seqs``; unset keys are absent."""
    engines: list[str] = field(default_factory=lambda: ["auto"])
    """Engine names (:func:`make_engines`); the first is primary, the others are compared with it."""
    engine_tolerance: float = acceptance.DEFAULT_AL_TOLERANCE
    tie_epsilon: float | None = None
    """Near-tie threshold in logit units (default per dtype, :data:`eaglehub.verify.forensics.TIE_EPSILON`)."""
    sampling_trials: int = 0
    """Trials per prefix of the T > 0 sampling test (0: no test)."""
    sampling_temperature: float = 1.0
    sampling_prefixes: int = 4
    engine_samples: int = 2000
    """With the sampling test: samples per prefix of each non-reference engine's own output test
    (:func:`eaglehub.verify.sampling_check.run_engine_sampling_test`); 0: none."""
    # a served endpoint (:mod:`eaglehub.verify.endpoint`)
    endpoint: str | None = None
    """The OpenAI-compatible server to measure (its root or ``…/v1``); set: no --drafter, the server's is measured."""
    baseline_endpoint: str | None = None
    """The target served alone, the losslessness baseline (else a local run of ``target``)."""
    endpoint_api: str | None = None
    """``completions`` (token ids; needs a local target) or ``chat``; ``None``: completions when the target is local."""
    concurrency: int = 8
    """Requests in flight at once against each endpoint."""
    api_key: str | None = field(default=None, repr=False)
    """Bearer token for the endpoints (default ``OPENAI_API_KEY``); never printed or written."""
    timeout: float = 120.0
    """Seconds per request."""
    device: str = "cpu"
    baseline_drafter: str | None = None
    """A drafter to compare every other one with (:mod:`eaglehub.verify.baseline`); it runs as the last drafter."""


MIN_SAMPLING_TRIALS = 1000


MAX_K = 64


REPORT_SCHEMA = "verify-report"


REPORT_VERSION = 2
