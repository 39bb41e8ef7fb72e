"""What convert does to its source before planning the output: it refuses a source with errors of its own, and
repairs the config faults the tensors settle (a target class, an undeclared ``target_hidden_size``, switches
stored where vLLM does not read them)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

from eaglehub.drafter.canonical import (
    LLAMA,
    MLA,
    MLA_ARCHITECTURES,
    QWEN3,
    QWEN3_ARCHITECTURES,
    Drafter,
    derive_dims,
    read_flags,
)
from eaglehub.errors import EaglehubError
from eaglehub.formats.base import default_arch
from eaglehub.formats.registry import FORMATS, LLAMA_EAGLE3_ARCHS, RESEARCH_ARCH, architecture

#: source errors ``--force`` converts past (the user's stated intent; the output keeps the value, its check too)
FORCEABLE = frozenset({"E-CONFIG-SCHEMA"})


def _errors(d: Drafter, moot: frozenset[str] = frozenset()) -> list:
    from eaglehub.checks.validate import run_checks

    # without --deep's value checks: a byte-level conversion does not decode weights. Findings about what an
    # engine does with the source's layout (they name profiles) are the output's to answer: convert writes the
    # destination layout and validates that
    return [f for f in run_checks(d) if f.severity == "error" and not f.profiles and f.subject not in moot]


def refuse_source_errors(
    d: Drafter,
    force: bool = False,
    settings: dict | None = None,
    reread: Callable[[dict | None], Drafter] | None = None,
    moot: frozenset[str] = frozenset(),
) -> list:
    """Refuse a source with error findings; with ``force``, a config that breaks its schema is converted all
    the same and its findings are returned (the report warns with them).

    ``d`` is the source read with the ``--set`` edits ``settings``; ``reread(settings)`` reads it again with
    other edits (``None``: as stored). An error the stored source does not have is the edits': the refusal
    names the edit that makes it, not the source. Findings about a stored tensor in ``moot`` (a vocabulary map
    the output does not carry as stored) do not count."""
    errors = _errors(d, moot)
    accepted = [f for f in errors if force and f.code in FORCEABLE]
    errors = [f for f in errors if f not in accepted]
    if errors and settings and reread is not None:
        _refuse_edits(d, errors, settings, reread, moot)
    if errors:
        listed = ", ".join(sorted({f.code for f in errors}))
        only_schema = {f.code for f in errors} <= FORCEABLE
        raise EaglehubError(
            f"{d.path} has {len(errors)} error finding(s) ({listed}); refusing to convert",
            hint=f"run `eaglehub validate {d.path}` and fix them first"
            + (", or pass --force to convert the config as it is" if only_schema else ""),
            exit_code=1,
        )
    return accepted


def _refuse_edits(
    d: Drafter, errors: list, settings: dict, reread: Callable[[dict | None], Drafter], moot: frozenset[str]
) -> None:
    """Raise for the errors only the edits make (the source as stored has none of them), naming the edits."""
    from eaglehub.drafter.settings import setting_arg

    def found(edits: dict | None) -> set[tuple[str, str]]:
        return {(f.code, f.subject) for f in _errors(repair_config(reread(edits))[0], moot)}

    stored = found(None)
    made = [f for f in errors if (f.code, f.subject) not in stored]
    if not made:
        return
    keys = {(f.code, f.subject) for f in made}
    culprits = [k for k, v in settings.items() if found({k: v}) & keys] or list(settings)
    edits = " ".join(f"--set {setting_arg(k, settings[k])}" for k in culprits)
    first = made[0]
    more = f" (and {len(made) - 1} more: {', '.join(sorted({f.code for f in made[1:]}))})" if len(made) > 1 else ""
    rest = "" if stored else _stored_state(reread, d)
    raise EaglehubError(
        f"{edits} {'make' if len(culprits) > 1 else 'makes'} the config invalid: {first.code} {first.subject}: {first.message}{more}",
        hint=f"drop {edits} or give {'them values' if len(culprits) > 1 else 'it a value'} the tensors agree "
        f"with{rest}",
        exit_code=2,  # the option is at fault, not the source
    )


def _stored_state(reread: Callable[[dict | None], Drafter], d: Drafter) -> str:
    """What the refusal says of the source as stored: none of convert's own checks fail on it, but an engine may
    (a profile's finding, E-AUX-COUNT of an fc a short id list does not fit); saying "no error" then sends the
    user hunting for a fault in the edit alone."""
    from eaglehub.checks.validate import run_checks

    own = sorted({f.code for f in run_checks(repair_config(reread(None))[0]) if f.severity == "error"})
    if own:
        return (
            f"; the source as stored fails too ({', '.join(own)}): `eaglehub validate {d.path}` gives the edit that "
            "fixes it"
        )
    return "; the source as stored has no error finding"


def _lift_misplaced(d: Drafter, cfg: dict, changes: list[dict]) -> tuple[dict, dict]:
    """F16/F17: switches stored only in a sub-config vLLM does not read them from
    (:func:`eaglehub.checks.config.misplaced_flags`) move to the top level. Returns the repaired
    stored config and the format's carried keys, so the writer and the re-check see them there."""
    from eaglehub.checks.flags import misplaced_flags

    raw, carried = json.loads(json.dumps(d.raw_config)), dict(d.carried.get(d.format, {}))
    for where, key, value in misplaced_flags(d):
        changes.append(
            {
                "key": key,
                "old": None,
                "new": value,
                "why": f"stored only in {where}, where vLLM does not read it (F16, F17): moved to the top level",
            }
        )
        raw[key] = raw[where].pop(key)
        cfg[key] = value
        if d.format == "speculators":  # the writer places keys by the stored layout it carried
            carried["top_keys"] = [*carried.get("top_keys", ()), key]
            carried["layer_keys"] = [k for k in carried.get("layer_keys", ()) if k != key]
        elif isinstance(carried.get("eagle_config"), dict):
            carried["eagle_config"] = {k: v for k, v in carried["eagle_config"].items() if k != key}
    return raw, carried


def repair_config(d: Drafter) -> tuple[Drafter, list[dict]]:
    """Config-only faults that convert fixes because the tensors say what is right (docs/failure-kinds.md):
    F1, a target class or ``model_type`` in a drafter config (engines would build a full LM); F10, an
    undeclared ``target_hidden_size`` that the ``fc`` width gives away (``Ht = fc.in / A``); F16/F17,
    switches stored where vLLM does not read them (:func:`_lift_misplaced`)."""
    if d.format not in FORMATS:
        raise EaglehubError(
            f"{d.path} is not a convertible EAGLE-3 drafter ({d.format}: {'; '.join(d.evidence)})",
            hint=f"run `eaglehub validate {d.path}`",
            exit_code=1,
        )
    cfg = dict(d.config)
    changes: list[dict] = []
    raw, carried = _lift_misplaced(d, cfg, changes)

    def change(key, new, why):
        changes.append({"key": key, "old": cfg.get(key), "new": new, "why": why})
        cfg[key] = new

    kind, arch = d.layer_kind, architecture(cfg)
    allowed = {MLA: MLA_ARCHITECTURES, QWEN3: QWEN3_ARCHITECTURES}.get(kind, LLAMA_EAGLE3_ARCHS | {RESEARCH_ARCH})
    if arch not in allowed:
        change("architectures", [default_arch(kind)], f"{arch} is not a drafter class (F1)")
    if kind == LLAMA and cfg.get("model_type") != "llama":
        change("model_type", "llama", "vLLM parses a Llama-style drafter as llama (F1)")
    if kind == QWEN3 and cfg.get("model_type") not in ("qwen3", "llama"):
        change("model_type", "qwen3", "vLLM parses a Qwen3-style drafter as qwen3 (F1)")
    from eaglehub.checks.config import MLA_MODEL_TYPES  # here: the checks (numpy, jsonschema) load during the copy

    if kind == MLA and cfg.get("model_type") not in MLA_MODEL_TYPES:
        # deepseek_v3-family types are rewritten into an MTP model for any draft config (vLLM 0.33
        # config/speculative.py L749-754), which cannot load an EAGLE-3 drafter; SGLang takes the class from
        # architectures either way
        change(
            "model_type",
            "deepseek_v2",
            f"vLLM parses an MLA drafter as deepseek_v2 or kimi_k2, not {cfg.get('model_type')!r} (F1)",
        )
    fc, dims = d.tensors.get("fc.weight"), d.dims
    if (
        not dims.Ht_declared
        and fc is not None
        and len(fc.shape) == 2
        and dims.A
        and fc.shape[1] % dims.A == 0
        and fc.shape[1] // dims.A != dims.H
    ):
        change(
            "target_hidden_size",
            fc.shape[1] // dims.A,
            f"fc.weight {list(fc.shape)} reads A = {dims.A} states of this width (F10)",
        )
    if not changes:
        return d, []
    return replace(
        d,
        config=cfg,
        dims=derive_dims(cfg),
        flags=read_flags(cfg),
        raw_config=raw,
        carried={**d.carried, d.format: carried},
    ), changes
