"""``eaglehub diagnose``: show the drift EAGLE 3.1 targets — acceptance falling with draft depth and
with context length.

For each drafter and each context length (prompts padded with real text to an exact number of
target tokens, :mod:`eaglehub.measure.padding`), one greedy run with ``k = depth`` draft tokens
(1–:data:`MAX_DEPTH`) gives the acceptance rate per draft position, unconditional and conditional,
and the acceptance length (:mod:`eaglehub.measure.acceptance`, docs/vllm.md §9). Conditional rates show the
depth drift (how likely draft d+1 is accepted once draft d was), AL per context the length drift
(docs/failure-kinds.md F13). The reference engine (:mod:`eaglehub.engines.reference`) also records per
draft depth the drafter's hidden-state norm and the attention mass on the first tokens (the
attention sink); vLLM gives counters only. With one EAGLE-3 and one EAGLE-3.1 drafter the two are
labelled by version (:attr:`eaglehub.drafter.canonical.Drafter.version`) and shown side by side.

Every drafter is first checked as ``verify`` checks it (:func:`eaglehub.checks.validate.preflight`). The
report is a dict valid against ``schemas/diagnose-report.schema.json``; ``diagnose`` measures and
never fails on the numbers (exit 0), only on bad input (2) or a broken drafter or engine (1).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from eaglehub import __version__
from eaglehub.engines.base import Engine, RunResult, RunSpec
from eaglehub.errors import EaglehubError
from eaglehub.io.schemas import check_output, write_output
from eaglehub.measure import acceptance
from eaglehub.measure.context import max_context
from eaglehub.measure.padding import BOOK, PaddedPrompts, Skipped, build_contexts, padding_source
from eaglehub.measure.prompts import Prompt, default_prompts_path, load_prompts
from eaglehub.measure.runner import progress_runner, resolve_drafter

REPORT_SCHEMA = "diagnose-report"
REPORT_VERSION = 1
MAX_DEPTH = 8
"""Deepest draft chain measured: beyond 8 positions almost no draft is accepted (vLLM's own
acceptance tests stop at k = 3–7, docs/verification.md §2), so the rates would be noise."""
DEFAULT_CONTEXTS = (0, 1024, 2048, 4096)
ENGINES = ("reference", "vllm")

DEFINITIONS = {
    "acceptance_length": acceptance.AL_DEFINITION,
    "acceptance_rate_per_position": acceptance.PER_POSITION_DEFINITION,
    "draft_acceptance_rate": acceptance.DRAFT_RATE_DEFINITION,
    "context_tokens": "requested total prompt length in target tokens: the target's chat template applied to one user "
    "turn (system prompt and generation prompt included), the prompt placed after a document of "
    "padding text; a padded prompt is at most padding.tolerance_tokens shorter, never longer; "
    "0 = the prompts unpadded",
    "prompt_tokens": "per prompt (prompt order), the exact number of token ids the engine received",
    "padding_tokens": "per prompt, the number of padding-document tokens (target tokenizer) before the question",
    "draft_depth": "index d = 0..k-1 of a per-depth list: the draft token at position d+1 of a chain",
    "hidden_state_norm": "per draft depth, mean L2 norm of the drafter hidden state that produced that draft token "
    "(reference engine), over `samples` draft steps",
    "sink_attention_mass": "per draft depth, attention probability of the drafter's query row on the first "
    "`sink_tokens` positions, averaged over heads and layers, then over `samples` draft steps "
    "(reference engine); attention piling onto these tokens as depth or context grows is the "
    "attention sink (Xiao et al. 2023, arXiv 2309.17453)",
    "acceptance_length_relative_change": "(AL at the longest measured context - AL at the shortest) / AL at the "
    "shortest; -0.25 is a 25 % drop",
}


@dataclass
class DiagnoseOptions:
    """Inputs of one diagnose run (see ``eaglehub diagnose --help`` for units and defaults)."""

    target: str
    drafters: list[str]
    engine: str = "reference"
    depth: int = MAX_DEPTH
    contexts: list[int] = field(default_factory=lambda: list(DEFAULT_CONTEXTS))
    prompts_file: str | None = None
    categories: list[str] = field(default_factory=list)
    limit: int | None = None
    max_tokens: int = 64
    dtype: str = "float32"
    seed: int = 0
    device: str = "cpu"
    padding: str = BOOK
    fit_contexts: bool = False  # a named preset: lengths past the target's limit become the longest that fits


#: named context lists (``--contexts long``); a preset length past the target's limit is measured at
#: the longest prompt that fits (8k on SmolLM2: 8192 - max_tokens)
CONTEXT_PRESETS = {
    "short": (0, 1024, 2048, 4096),
    "long": (0, 2048, 4096, 8192),
    "xl": (0, 4096, 8192, 16384, 32768),
}


def parse_contexts(text: str) -> list[int]:
    """``"0,1024,2048"`` → ``[0, 1024, 2048]``: comma-separated prompt lengths in tokens, each ≥ 0,
    returned ascending without repeats; or a preset name of :data:`CONTEXT_PRESETS`.

    Raises:
        EaglehubError: (exit 2) empty, a part that is not a non-negative integer.
    """
    if text.strip() in CONTEXT_PRESETS:
        return list(CONTEXT_PRESETS[text.strip()])
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p.isdigit() or not p.isascii() for p in parts):
        raise EaglehubError(
            f"--contexts {text!r}: expected comma-separated token counts like 0,1024,2048,4096 or a preset",
            hint=f"0 = the prompts unpadded; others pad each prompt to that many tokens; presets: {', '.join(CONTEXT_PRESETS)}",
        )
    return sorted({int(p) for p in parts})


def make_engine(name: str, device: str = "cpu") -> Engine:
    """The engine called ``name`` (:data:`ENGINES`); ``device`` is the reference engine's (cpu, cuda).

    Raises:
        EaglehubError: (exit 2) an unknown engine name.
    """
    if name not in ENGINES:
        raise EaglehubError(f"unknown engine {name!r}", hint=f"pick one of {', '.join(ENGINES)}")
    from eaglehub.engines.registry import make_engines

    return make_engines([name], device=device)[0]


def drafter_labels(versions: list[str], paths: list[Path]) -> list[str]:
    """``EAGLE-3`` / ``EAGLE-3.1`` per drafter; the directory name is added where a label repeats."""
    labels = [f"EAGLE-{v}" for v in versions]
    return [f"{lab} ({p.name})" if labels.count(lab) > 1 else lab for lab, p in zip(labels, paths)]


def _resolve_drafter(spec: str) -> tuple[Path, str]:
    """``(resolved directory, EAGLE version)``. Raises: EaglehubError (exit 2) as ``read_drafter``."""
    from eaglehub.formats.registry import read_drafter

    path = resolve_drafter(spec)
    return path, read_drafter(path).version


def run_section(context: PaddedPrompts, run: RunResult) -> dict:
    """The report entry of one (drafter, context) run: overall and per-category acceptance, the
    engine's per-depth diagnostics (``None`` when it has none), generation time."""
    return {
        "context_tokens": context.context_tokens,
        "acceptance": acceptance.acceptance_stats(acceptance.total(run.group_counters.values())),
        "per_category": {g: acceptance.acceptance_stats(c) for g, c in run.group_counters.items()},
        "diagnostics": run.diagnostics,
        "generate_seconds": round(run.generate_seconds, 3),
        "output_tokens": run.num_output_tokens,
    }


def drift_summary(runs: list[dict]) -> dict:
    """AL at the shortest and longest measured context of one drafter and its relative change
    (:func:`eaglehub.measure.acceptance.relative_change`; ``None`` with fewer than two contexts or an
    undefined AL)."""
    if not runs:
        return {
            "shortest_context": None,
            "longest_context": None,
            "acceptance_length_shortest": None,
            "acceptance_length_longest": None,
            "acceptance_length_relative_change": None,
        }
    first, last = runs[0], runs[-1]
    al0, al1 = first["acceptance"]["acceptance_length"], last["acceptance"]["acceptance_length"]
    change = acceptance.relative_change(al1, al0) if len(runs) > 1 and None not in (al0, al1) else None
    return {
        "shortest_context": first["context_tokens"],
        "longest_context": last["context_tokens"],
        "acceptance_length_shortest": al0,
        "acceptance_length_longest": al1,
        "acceptance_length_relative_change": change,
    }


def context_section(c: PaddedPrompts | Skipped) -> dict:
    """One entry of the report's ``contexts``: measured (exact token counts) or skipped (why)."""
    if isinstance(c, Skipped):
        return {
            "context_tokens": c.context_tokens,
            "status": "skipped",
            "note": c.note,
            "prompt_tokens": None,
            "padding_tokens": None,
        }
    return {
        "context_tokens": c.context_tokens,
        "status": "measured",
        "note": None,
        "prompt_tokens": c.lengths,
        "padding_tokens": c.padding_tokens,
    }


def build_report(
    opts: DiagnoseOptions,
    target: Path,
    prompts: list[Prompt],
    prompts_file: Path,
    built: list[PaddedPrompts],
    skipped: list[Skipped],
    drafters: list[tuple[Path, str]],
    runs: list[list[RunResult]],
    max_model_len: int,
    engine: dict,
) -> dict:
    """Assemble the report (schema ``schemas/diagnose-report.schema.json``); ``runs[i][j]`` is drafter
    ``i`` at context ``built[j]``."""
    categories: dict[str, int] = {}
    for p in prompts:
        categories[p.category] = categories.get(p.category, 0) + 1
    labels = drafter_labels([v for _, v in drafters], [d for d, _ in drafters])
    sections = []
    for (path, version), label, results in zip(drafters, labels, runs):
        per_context = [run_section(c, r) for c, r in zip(built, results)]
        sections.append(
            {
                "drafter": str(path),
                "eagle_version": version,
                "label": label,
                "runs": per_context,
                "drift": drift_summary(per_context),
            }
        )
    contexts = sorted(
        [context_section(c) for c in built] + [context_section(c) for c in skipped], key=lambda c: c["context_tokens"]
    )
    return {
        "report_version": REPORT_VERSION,
        "tool": {"name": "eaglehub", "version": __version__},
        "engine": engine,
        "target": {"spec": opts.target, "path": str(target), "max_position_embeddings": max_context(target)},
        "settings": {
            "num_speculative_tokens": opts.depth,
            "max_tokens": opts.max_tokens,
            "dtype": opts.dtype,
            "temperature": 0.0,
            "seed": opts.seed,
            "max_model_len": max_model_len,
            "contexts_requested": list(opts.contexts),
            "diagnostics_requested": True,
            "batching": "per context length, one batch per prompt category (counters read between batches; the "
            "reference engine decodes one prompt at a time)",
        },
        "prompts": {
            "file": str(prompts_file),
            "sha256": hashlib.sha256(prompts_file.read_bytes()).hexdigest(),
            "count": len(prompts),
            "categories": categories,
        },
        "padding": padding_source(opts.padding),
        "contexts": contexts,
        "definitions": dict(DEFINITIONS),
        "drafters": sections,
    }


def validate_report(report: dict) -> None:
    """Check ``report`` against its schema. Raises: EaglehubError (exit 1: a bug in eaglehub)."""
    check_output(report, REPORT_SCHEMA, "diagnose report")


def write_report(report: dict, path: str | Path) -> Path:
    """Validate, then write ``report`` as JSON to ``path`` atomically.

    Raises:
        EaglehubError: schema violation (exit 1) or the file cannot be written (exit 2).
    """
    return write_output(report, path, REPORT_SCHEMA, "diagnose report")


def run_diagnose(opts: DiagnoseOptions, engine: Engine | None = None, console=None) -> dict:
    """Pad the prompts, run every drafter at every context length the target allows, return the
    validated report.

    ``engine``: ``None`` builds ``opts.engine`` (:func:`make_engine`); ``console``: a rich Console
    for the progress bar (``None``: no progress display).

    Raises:
        EaglehubError: bad options, target, drafter or prompts (exit 2), the engine missing (2), a
            drafter with error findings (1, :func:`eaglehub.checks.validate.preflight`), no context length
            the target allows (2), an engine failure (1).
    """
    from eaglehub.checks.validate import preflight
    from eaglehub.target import resolve_target
    from eaglehub.verify.preflight import engine_profile

    if not 1 <= opts.depth <= MAX_DEPTH:
        raise EaglehubError(f"--depth must be 1..{MAX_DEPTH}, got {opts.depth}")
    if opts.max_tokens < 1:
        raise EaglehubError(f"--max-tokens must be at least 1, got {opts.max_tokens}")
    if not opts.drafters:
        raise EaglehubError("give at least one --drafter")
    if not opts.contexts or any(c < 0 for c in opts.contexts):
        raise EaglehubError(f"context lengths must be token counts ≥ 0, got {opts.contexts}")
    engine = engine or make_engine(opts.engine, opts.device)
    engine_info = {"name": engine.name, "version": engine.version()}  # fails fast when the engine is missing
    drafters = [_resolve_drafter(d) for d in opts.drafters]
    target = resolve_target(opts.target)
    for d, _ in drafters:
        preflight(d, target, (engine_profile(engine).id,))  # as the engine that runs it reads it
    prompts_file = Path(opts.prompts_file) if opts.prompts_file else None
    prompts = load_prompts(prompts_file, opts.categories, opts.limit)
    built, skipped = _padded(target, prompts, opts, console)
    if not built:
        raise EaglehubError(
            f"no requested context length fits target {target}: " + "; ".join(s.note for s in skipped),
            hint="pass shorter --contexts or a smaller --max-tokens",
        )
    longest = max(max(c.lengths) for c in built)
    limit = max_context(target)
    # one max_model_len for every run, so runs differ only in their prompts; +depth: the last
    # verify pass reads up to k draft tokens beyond max_tokens
    max_model_len = longest + opts.max_tokens + opts.depth
    max_model_len = min(max_model_len, limit) if limit else max_model_len
    groups = [p.category for p in prompts]
    specs = [
        (
            d,
            c,
            RunSpec(target, d, opts.depth, opts.max_tokens, opts.dtype, opts.seed, max_model_len, diagnostics=True),
        )
        for d, _ in drafters
        for c in built
    ]
    results = _run_all(engine, specs, groups, console)
    runs = [results[i * len(built) : (i + 1) * len(built)] for i in range(len(drafters))]
    report = build_report(
        opts,
        target,
        prompts,
        (prompts_file or default_prompts_path()).resolve(),
        built,
        skipped,
        drafters,
        runs,
        max_model_len,
        engine_info,
    )
    validate_report(report)
    return report


def _padded(target: Path, prompts: list[Prompt], opts: DiagnoseOptions, console):
    texts = [p.text for p in prompts]
    args = (target, texts, opts.contexts, opts.max_tokens, opts.padding, opts.fit_contexts)
    if console is None:
        return build_contexts(*args)
    with console.status(f"padding {len(texts)} prompts to {', '.join(map(str, opts.contexts))} tokens"):
        return build_contexts(*args)


def _run_all(
    engine: Engine, specs: list[tuple[Path, PaddedPrompts, RunSpec]], groups: list[str], console
) -> list[RunResult]:
    """Every (drafter, context) run in order, with a rich progress bar (one task per run, in prompts)."""
    with progress_runner(console) as run:
        return [
            run(engine, s, c.ids, groups, f"{drafter.name} · context {c.context_tokens} · k={s.k}")
            for drafter, c, s in specs
        ]


# --- terminal view ---------------------------------------------------------------------------
