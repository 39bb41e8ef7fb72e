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
    profiles: list[str] = field(default_factory=list)
    """Engine profiles the preflight judges each drafter for besides those of the engines run
    (:mod:`eaglehub.verify.preflight`); with ``--dry-run`` the first is the release the launch plan is for."""
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
    served_config: str | None = None
    """The served speculative config as the user states it (the JSON of ``vllm serve --speculative-config``, or a
    file), taken where the server does not say its settings (:mod:`eaglehub.endpoint.settings`)."""
    device: str = "cpu"
    probe: bool = False
    """Also probe each drafter's config readings (:func:`eaglehub.probe.run.probe`) on the same prompts, in the
    reference engine; a configured reading clearly beaten by another fails the drafter."""
    baseline_drafter: str | None = None
    """A drafter to compare every other one with (:mod:`eaglehub.verify.baseline`); it runs as the last drafter."""
    # served settings (:mod:`eaglehub.verify.sampled`); the endpoint sends them to servers under these names
    temperature: float = 0.0
    """> 0: each drafter also runs sampled at this temperature (the greedy runs stay: losslessness is greedy)."""
    top_p: float = 1.0
    """Sampled runs: nucleus filter (1: off)."""
    top_k: int = 0
    """Sampled runs: top-k filter (0: off)."""
    samples: int = 1
    """Sampled runs: samples (repeats) of every prompt."""
    chat_template_kwargs: dict = field(default_factory=dict)
    """Variables passed to the target's chat template in every run (:mod:`eaglehub.engines.chat`)."""
    # long context (:mod:`eaglehub.measure.padding`)
    context: int | None = None
    """Pad every prompt to this many target tokens (chat template included) with real text before the
    question; ``None``: the prompts as they are."""
    context_fit: bool = False
    """A ``k`` length (``--context 8k``): past the target's limit, the longest prompt that fits instead."""
    padding: str = "book"
    """The padding corpus (:data:`eaglehub.measure.padding.CORPORA`)."""
    # production features of a local vLLM run (:mod:`eaglehub.verify.production`); None: vLLM's default
    prefix_caching: bool | None = None
    """vLLM ``enable_prefix_caching`` for every run (vLLM 0.32's default: on)."""
    chunked_prefill: bool | None = None
    """vLLM ``enable_chunked_prefill`` for every run (vLLM 0.32's default: on)."""
    max_num_batched_tokens: int | None = None
    """vLLM's token budget per scheduler step; below a prompt's length, chunked prefill splits that prompt."""
    in_flight: int | None = None
    """``--concurrency`` of a local run: vLLM ``max_num_seqs`` and every prompt in one batch
    (:attr:`~eaglehub.engines.base.RunSpec.one_batch`); ``None``: one batch per category."""
    k_schedule: list | None = None
    """vLLM ``num_speculative_tokens_per_batch_size`` for the drafter runs: ``[[first, last, k], ...]``."""


MIN_SAMPLING_TRIALS = 1000

RESERVED_TEMPLATE_KEYS = frozenset(
    {"conversation", "messages", "tokenize", "add_generation_prompt", "continue_final_message", "return_dict"}
)
"""``apply_chat_template`` arguments eaglehub sets itself: not template variables."""


def parse_chat_template_kwargs(text: str | None) -> dict:
    """``--chat-template-kwargs`` JSON as a dict (``None`` or empty: no variables).

    Raises:
        UsageError: not JSON, not an object, or it names an argument eaglehub sets
            (:data:`RESERVED_TEMPLATE_KEYS`).
    """
    import json

    from eaglehub.errors import UsageError

    if not text:
        return {}
    hint = """give a JSON object of template variables, e.g. --chat-template-kwargs '{"enable_thinking": false}'"""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--chat-template-kwargs is not JSON: {exc.msg} at character {exc.pos}", hint=hint) from exc
    if not isinstance(value, dict):
        raise UsageError(f"--chat-template-kwargs must be a JSON object, got {type(value).__name__}", hint=hint)
    reserved = sorted(RESERVED_TEMPLATE_KEYS & set(value))
    if reserved:
        raise UsageError(f"--chat-template-kwargs sets {', '.join(reserved)}, which eaglehub sets itself", hint=hint)
    return value


MAX_K = 64


REPORT_SCHEMA = "verify-report"


REPORT_VERSION = 2
