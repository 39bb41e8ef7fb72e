"""Serving-side checks: the vLLM version a drafter needs (docs/vllm.md §12) and tensor-parallel
divisibility at the TP size the pair is served with (docs/failure-kinds.md F21).

The version is each judged vLLM profile's release (``--profile``, or the default profile); an explicit
``--vllm-version`` without ``--profile`` is compared as given (a pre-release of a minimum is older than it).
``--vllm-version ""`` means unknown: the rules then assume :data:`BASELINE` (the oldest vLLM that reads
EAGLE-3.1 flags at all) and warn only about features that need more than that.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eaglehub.checks.context import Context
from eaglehub.drafter.shapes import MLA, QWEN3, layer_kind
from eaglehub.errors import EaglehubError
from eaglehub.findings import Finding, finding

BASELINE = "0.22.0"


@dataclass(frozen=True)
class VersionRule:
    """A drafter feature that needs vLLM ``>= minimum`` (docs/vllm.md §12 and the PR named in ``why``)."""

    subject: str
    minimum: str
    applies: Callable[[Context], bool]
    why: str


def _three_one(ctx: Context) -> bool:
    return ctx.drafter.flags.fc_norm or ctx.drafter.flags.norm_output


VERSION_RULES = (
    VersionRule(
        "architectures",
        "0.24.0",
        lambda c: layer_kind(c.drafter.config) == QWEN3,
        "vLLM builds Qwen3-style drafters (Eagle3Qwen3ForCausalLM, q/k-norm attention) from 0.24.0; older "
        "versions cannot resolve the class",
    ),
    VersionRule(
        "fc_norm",
        "0.22.0",
        lambda c: _three_one(c) and layer_kind(c.drafter.config) != MLA,
        "EAGLE-3.1 flags (fc_norm, norm_output) are read from vLLM 0.22.0 (PR #42764); older versions ignore them",
    ),
    VersionRule(
        "fc_norm",
        "0.23.0",
        lambda c: c.drafter.flags.fc_norm and layer_kind(c.drafter.config) == MLA,
        "the MLA drafter applies fc_norm from vLLM 0.23.0 (PR #43482); 0.22.x loads the weights and never applies them",
    ),
    VersionRule(
        "fc_norm",
        "0.25.0",
        lambda c: _three_one(c) and c.drafter.format == "speculators",
        "the speculators adapter passes fc_norm/norm_output from vLLM 0.25.0 (PR #46488); older versions drop them",
    ),
)


def parse_version(text: str):
    """``packaging.version.Version`` of a vLLM version string (``"0.32.0"``, ``"0.32.0+cpu"``).

    Raises: EaglehubError (exit 2) for a string that is not a version.
    """
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text)
    except InvalidVersion as exc:
        raise EaglehubError(f"--vllm-version {text!r} is not a version", hint="give a release such as 0.32.0") from exc


def _profile_versions(ctx: Context) -> list[Finding]:
    """The version rules for each judged vLLM profile's release (SGLang profiles are not vLLM's to judge)."""
    from eaglehub.checks.profiles import Said, merge
    from eaglehub.profiles.registry import VLLM

    judged = list(ctx.options.engine_profiles())
    said: dict[str, list[Said]] = {p.id: [] for p in judged}
    for rule in VERSION_RULES:
        if not rule.applies(ctx):
            continue
        for p in judged:
            if p.engine == VLLM and not p.at_least(rule.minimum):
                said[p.id].append(
                    Said("E-ENGINE-VERSION", rule.subject, rule.why, f"serve with vLLM >= {rule.minimum}")
                )
    return merge(said, [p.id for p in judged])


def _versions(ctx: Context) -> list[Finding]:
    if ctx.options.profiles or ctx.options.vllm_version is None or not ctx.options.vllm_version_given:
        return _profile_versions(ctx)
    given = ctx.options.vllm_version
    have = parse_version(given) if given else None
    out = []
    for rule in VERSION_RULES:
        if not rule.applies(ctx):
            continue
        need = parse_version(rule.minimum)
        if have is not None and parse_version(have.public) < need:  # a pre-release of the minimum is older than it
            out.append(
                finding(
                    "E-ENGINE-VERSION",
                    rule.subject,
                    f"{rule.why}; this drafter will be served with vLLM {given}",
                    f"serve with vLLM >= {rule.minimum}",
                )
            )
        elif have is None and need > parse_version(BASELINE):
            out.append(
                finding(
                    "W-ENGINE-VERSION",
                    rule.subject,
                    f"{rule.why}; no vLLM version is known here",
                    f"serve with vLLM >= {rule.minimum} (pass --vllm-version to check)",
                )
            )
    return out


def tp_problems(heads: int | None, kv_heads: int | None, intermediate: int | None, tp: int) -> list[tuple[str, str]]:
    """``[(field, why)]`` for dimensions vLLM cannot shard ``tp`` ways (vLLM ``linear.py``:
    ``QKVParallelLinear`` splits query heads evenly and KV heads evenly when ``nkv >= tp``, else
    replicates them ``tp / nkv`` times; ``MergedColumnParallelLinear`` splits ``intermediate_size``)."""
    out = []
    if heads and heads % tp:
        out.append(("num_attention_heads", f"num_attention_heads {heads} is not divisible by TP {tp}"))
    if kv_heads and (kv_heads % tp if kv_heads >= tp else tp % kv_heads):
        rule = f"divisible by TP {tp}" if kv_heads >= tp else f"a divisor of TP {tp} (replicated KV heads)"
        out.append(("num_key_value_heads", f"num_key_value_heads {kv_heads} is not {rule}"))
    if intermediate and intermediate % tp:
        out.append(("intermediate_size", f"intermediate_size {intermediate} is not divisible by TP {tp}"))
    return out


def _tensor_parallel(ctx: Context) -> list[Finding]:
    """F21: vLLM builds the drafter with the target's TP (``draft_tensor_parallel_size`` is 1 or the
    target's), so both models' attention and the drafter's MLP must shard ``--tp`` ways."""
    tp = ctx.options.tp
    if not tp or tp == 1:
        return []
    d = ctx.drafter.dims
    kv = None if layer_kind(ctx.drafter.config) == MLA else d.nkv  # MLA: one latent KV, replicated
    out = [
        finding("E-TP-DIVISIBILITY", key, f"drafter: {why}; vLLM builds the drafter with the target's TP")
        for key, why in tp_problems(d.nh, kv, d.I, tp)
    ]
    if ctx.target is not None:
        t = ctx.target.text_config

        def get(key):
            v = t.get(key)
            return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None

        out += [
            finding("E-TP-DIVISIBILITY", f"target {key}", f"target: {why}")
            for key, why in tp_problems(get("num_attention_heads"), get("num_key_value_heads"), None, tp)
        ]
    return out


def check(ctx: Context) -> list[Finding]:
    return _versions(ctx) + _tensor_parallel(ctx)
