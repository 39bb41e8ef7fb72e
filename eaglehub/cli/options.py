"""Options shared by several verbs, declared once so their names, types and help never drift.

Each function returns a decorator; ``@k_option()`` on a command adds ``-k/--num-speculative-tokens``
exactly as every other verb spells it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from eaglehub.constants import DEFAULT_DTYPE, DEFAULT_K, DEFAULT_MAX_TOKENS, DTYPES

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]

#: output/source format names (eaglehub.formats.registry.FORMATS; listed here so --help needs no import)
FORMAT_CHOICE = click.Choice(["vllm", "speculators", "specforge", "torchspec", "modelopt"])


def stack(*decorators: Decorator) -> Decorator:
    """Apply ``decorators`` in the order written (the first is the outermost option in --help)."""

    def apply(fn: Callable[..., Any]) -> Callable[..., Any]:
        for deco in reversed(decorators):
            fn = deco(fn)
        return fn

    return apply


def json_option(what: str = "the report", schema: str | None = None) -> Decorator:
    extra = f" (schemas/{schema})" if schema else ""
    return click.option("--json", "as_json", is_flag=True, help=f"Print {what} as JSON{extra}.")


def source_format_option() -> Decorator:
    return click.option(
        "--from",
        "source_format",
        type=FORMAT_CHOICE,
        default=None,
        help="Source format, when detection is ambiguous.",
    )


def revision_option() -> Decorator:
    return click.option("--revision", default=None, help="Branch, tag or commit when SRC is a hub repo id.")


def overwrite_option() -> Decorator:
    return click.option("--overwrite", is_flag=True, help="Replace DST if it exists.")


def target_option(required: bool = False, help: str | None = None) -> Decorator:
    return click.option(
        "--target",
        "target_spec",
        required=required,
        default=None,
        help=help or "Target: model directory, cached Hub id, or `smollm2`.",
    )


def k_option() -> Decorator:
    return click.option(
        "-k",
        "--num-speculative-tokens",
        "k",
        type=click.IntRange(min=1),
        default=DEFAULT_K,
        show_default=True,
        help="Draft tokens per step.",
    )


def max_tokens_option() -> Decorator:
    return click.option(
        "--max-tokens",
        type=click.IntRange(min=1),
        default=DEFAULT_MAX_TOKENS,
        show_default=True,
        help="Output tokens per prompt (cap).",
    )


def limit_option(help: str = "At most N prompts per category.") -> Decorator:
    return click.option("--limit", type=click.IntRange(min=1), default=None, help=help)


def category_option() -> Decorator:
    return click.option("--category", "categories", multiple=True, help="Only this prompt category (repeatable).")


def prompts_option(help: str | None = None) -> Decorator:
    return click.option(
        "--prompts",
        "prompts_file",
        type=click.Path(dir_okay=False),
        default=None,
        help=help
        or "Prompt file in any format verify reads (eaglehub JSONL, MT-Bench / Spec-Bench JSONL, plain text); "
        "the first turn of each prompt is used; default eaglehub/data/prompts/eval.jsonl.",
    )


def dtype_option(help: str = "Engine compute dtype.") -> Decorator:
    return click.option("--dtype", type=click.Choice(DTYPES), default=DEFAULT_DTYPE, show_default=True, help=help)


def device_option(help: str = "Reference engine device (cpu, cuda).") -> Decorator:
    return click.option("--device", default="cpu", show_default=True, help=help)


def engine_log_option() -> Decorator:
    return click.option(
        "--engine-log",
        type=click.Path(file_okay=False),
        default=None,
        help="Keep the engine logs in this directory.",
    )


def report_option(help: str) -> Decorator:
    return click.option("--report", "report_path", type=click.Path(dir_okay=False), default=None, help=help)


def plot_option(help: str) -> Decorator:
    return click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None, help=help)


def hub_endpoint_option() -> Decorator:
    return click.option(
        "--endpoint", default=None, help="Hub endpoint (default: huggingface_hub's configured one, HF_ENDPOINT)."
    )


endpoint_options = stack(  # verify --endpoint (eaglehub.verify.endpoint)
    click.option(
        "--endpoint",
        default=None,
        metavar="URL",
        help="Measure the drafter of this running OpenAI-compatible server (vLLM, SGLang; its root or .../v1) "
        "instead of launching one: acceptance from the server's own counters, losslessness against "
        "--baseline-endpoint or a local --target. No --drafter.",
    ),
    click.option(
        "--baseline-endpoint",
        default=None,
        metavar="URL",
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
        default=8,
        show_default=True,
        help="With --endpoint: requests in flight at once.",
    ),
    click.option(
        "--api-key",
        default=None,
        envvar="OPENAI_API_KEY",
        show_envvar=True,
        help="With --endpoint: Bearer token for the servers; never printed or written.",
    ),
    click.option(
        "--timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=120.0,
        show_default=True,
        help="With --endpoint: seconds per request.",
    ),
)


def served_settings_options() -> Decorator:
    """``verify``'s sampled-run settings (``--temperature``, ``--top-p``, ``--top-k``, ``--seed``,
    ``--samples``) and ``--chat-template-kwargs``, under the names servers use."""
    return stack(
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
)
