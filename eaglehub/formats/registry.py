"""Drafter formats: detection with evidence (docs/formats.md §6) and reading into the canonical
:class:`eaglehub.drafter.canonical.Drafter`; every format is read → canonical → written, never format → format.

Formats (:data:`FORMATS`): ``vllm`` (EAGLE research and vLLM-native), ``speculators``,
``specforge``, ``torchspec`` (export), ``modelopt``. Llama-style and MLA layers are a property of the
drafter (:attr:`Drafter.layer_kind`), not a format.
"""

from __future__ import annotations

from pathlib import Path

from eaglehub.drafter.canonical import (
    AUX_KEY,
    C_OUT,
    LAYER0,
    MLA,
    MLA_ARCHITECTURES,
    QWEN3_ARCHITECTURES,
    Drafter,
    architecture,
    derive_dims,
    int_field,
    layer_kind,
    nested_config,
    read_config,
    read_flags,
)
from eaglehub.errors import EaglehubError
from eaglehub.formats.base import FlatFormat, Format, Loss, Reading
from eaglehub.formats.speculators import SpeculatorsFormat
from eaglehub.io.tensorio import TensorIndex, read_index

#: ``architectures[0]`` values vLLM maps to ``llama_eagle3.Eagle3LlamaForCausalLM`` (docs/vllm.md §1).
LLAMA_EAGLE3_ARCHS = frozenset(
    {
        "Eagle3LlamaForCausalLM",
        "LlamaForCausalLMEagle3",
        "Eagle3MiniMaxM2ForCausalLM",
        "Eagle3Qwen2_5vlForCausalLM",
        "Eagle3Qwen3vlForCausalLM",
        "PEagleDraftModel",
        "PeagleLlamaForCausalLM",
    }
)
#: EAGLE research class; vLLM rewrites it to ``Eagle3LlamaForCausalLM`` (docs/vllm.md §1).
RESEARCH_ARCH = "LlamaForCausalLM"
MLA_ARCHS = MLA_ARCHITECTURES
QWEN3_ARCHS = QWEN3_ARCHITECTURES
TORCHSPEC_MARKER = "_torchspec_version"

MODELOPT_NESTED = {
    "use_aux_hidden_state": True,
    "use_input_layernorm_in_first_layer": True,
    "use_last_layernorm": True,
    "use_mtp_layernorm": False,
    "next_layer_regular": True,
}


class _TorchSpec(FlatFormat):
    def marker(self, raw, metadata):
        if TORCHSPEC_MARKER in raw:
            return f"config has {TORCHSPEC_MARKER}"
        return "safetensors metadata has torchspec_version" if "torchspec_version" in metadata else None


class _ModelOpt(FlatFormat):
    def marker(self, raw, metadata):
        return (
            "eagle_config.next_layer_regular (ModelOpt export)" if "next_layer_regular" in nested_config(raw) else None
        )


FORMATS: dict[str, Format] = {
    "vllm": FlatFormat(
        "vllm",
        LAYER0,
        mla=True,
        qwen3=True,
        archs=LLAMA_EAGLE3_ARCHS | MLA_ARCHS | QWEN3_ARCHS | {RESEARCH_ARCH},
        description="EAGLE research / vLLM-native: flat config, top-level C-in aux ids, midlayer.*",
    ),
    "speculators": SpeculatorsFormat(
        "speculators",
        "layers.0.",
        vocab_maps="unequal-both",
        qwen3=True,
        archs=frozenset({"LlamaForCausalLMEagle3"}) | QWEN3_ARCHS,
        description="vllm-project/speculators: speculators_config + transformer_layer_config, layers.{i}.*",
    ),
    "specforge": FlatFormat(
        "specforge",
        LAYER0,
        max_layers=1,
        norm_before_fc=False,
        norm_before_residual=False,
        # SpecForge ships both maps with every pruned drafter; an identity d2t (Vd == V) is refused by vLLM's
        # loader since 0.30 (no draft_id_to_target_id parameter), so an unpruned drafter is written without them
        vocab_maps="pruned-both",
        nested_ids=True,
        archs=frozenset({"LlamaForCausalLMEagle3"}),
        fc_norm_chunks=3,
        description="SpecForge: midlayer.*, nested C-out aux ids, d2t/t2d when pruned",
    ),
    "torchspec": _TorchSpec(
        "torchspec",
        "layers.0.",
        mla=True,
        max_layers=1,
        norm_before_residual=False,
        vocab_maps="pruned-both",
        nested_ids=True,
        private_keys=(TORCHSPEC_MARKER,),
        metadata_stamps=("torchspec_version",),
        stamp_marker=True,
        archs=LLAMA_EAGLE3_ARCHS | MLA_ARCHS,
        description="TorchSpec export: layers.0.*, _torchspec_version, nested C-out aux ids",
    ),
    "modelopt": _ModelOpt(
        "modelopt",
        "layers.0.",
        mla=True,
        embed=False,
        norm_before_residual=False,
        vocab_maps="d2t-only",
        nested_ids=True,
        archs=frozenset({"LlamaForCausalLMEagle3"}) | MLA_ARCHS,
        default_nested=MODELOPT_NESTED,
        description="NVIDIA ModelOpt export: layers.0.*, eagle_config.next_layer_regular, d2t only",
    ),
}
FORMAT_NAMES = tuple(FORMATS)
#: formats that leave no marker of their own (told apart by structure, or by eaglehub.json)
MARKERLESS = frozenset(n for n, f in FORMATS.items() if type(f).marker is Format.marker)
#: formats whose outputs eaglehub tells by the format eaglehub.json records: no marker, or a marker that is
#: only the producer's stamp (eaglehub does not stamp its outputs as the producer's exports)
RECORDABLE = MARKERLESS | frozenset(n for n, f in FORMATS.items() if f.stamp_marker)
#: kinds that are recognised but not read as drafters (validate rejects them with a finding).
REJECTED = ("not-a-drafter", "eagle1", "unsupported")


def _rejected(cfg: dict, index: TensorIndex) -> tuple[str, list[str]] | None:
    """Not an EAGLE-3 drafter at all (F3), EAGLE-1/2 (docs/formats.md §6.4), or an unsupported class."""
    names, arch = index.names(), architecture(cfg)
    if "speculators_model_type" in cfg and cfg["speculators_model_type"] != "eagle3":
        return "unsupported", [
            f"speculators_model_type {cfg['speculators_model_type']!r} (only eagle3 is an EAGLE-3 drafter)"
        ]
    evidence = (
        "fc.weight" in names
        or "d2t" in names
        or "draft_vocab_size" in cfg
        or "speculators_model_type" in cfg
        or arch in LLAMA_EAGLE3_ARCHS | MLA_ARCHS | QWEN3_ARCHS
        or any(n.startswith(LAYER0) for n in names)
    )
    if not evidence:
        return "not-a-drafter", [
            f"{arch} with {cfg.get('num_hidden_layers')} layers, no fc.weight, no draft_vocab_size, no midlayer.*"
        ]
    fc, H = index.tensors.get("fc.weight"), int_field(cfg, "hidden_size")
    if (
        fc is not None
        and len(fc.shape) == 2
        and fc.shape[1] == 2 * (H or -1)
        and not any("hidden_norm" in n for n in names)
    ):
        return "eagle1", [f"fc.weight {list(fc.shape)} reads 2H and there is no hidden_norm (EAGLE-1/2)"]
    return None


def detect(cfg: dict, index: TensorIndex, recorded: str | None = None) -> tuple[str, list[str]]:
    """``(format, evidence)`` by docs/formats.md §6: a format's own marker first, then the format
    eaglehub recorded when it wrote the checkpoint (``recorded``, from ``eaglehub.json``; only for
    formats without a marker of their own), then structure.

    Raises:
        EaglehubError: markers of two formats, or structure that fits several formats with no
            marker to decide (``ambiguous``; exit 2, hint ``--from``).
    """
    rejected = _rejected(cfg, index)
    if rejected:
        return rejected
    markers = {n: m for n, f in FORMATS.items() if (m := f.marker(cfg, index.metadata))}
    if len(markers) > 1:
        raise _ambiguous(markers)
    if markers:
        ((name, why),) = markers.items()
        return name, [why]
    try:
        name, evidence = _structure(cfg, index)
    except EaglehubError as exc:
        candidates = getattr(exc, "candidates", [])
        if recorded is None or recorded not in candidates:
            raise
        return recorded, [
            f"eaglehub.json records that eaglehub wrote it as {recorded}",
            f"structure alone fits {' or '.join(candidates)}",
        ]
    if recorded in RECORDABLE and recorded != name:
        return recorded, [
            f"eaglehub.json records that eaglehub wrote it as {recorded}",
            f"structure alone: {name} ({'; '.join(evidence)})",
        ]
    return name, evidence


def _structure(cfg: dict, index: TensorIndex) -> tuple[str, list[str]]:
    """Tell the marker-less formats apart by names, classes and where the aux ids live."""
    names = index.names()
    mid = any(n.startswith(LAYER0) for n in names)
    spelled = "midlayer.* tensor names" if mid else "layers.0.* tensor names"
    nested_only = AUX_KEY in nested_config(cfg) and AUX_KEY not in cfg
    pruned = isinstance(cfg.get("draft_vocab_size"), int) and cfg.get("draft_vocab_size") != cfg.get("vocab_size")
    if nested_only:
        if mid and layer_kind(cfg) == MLA:
            return "torchspec", [
                spelled,
                "MLA drafter with aux ids only in eagle_config: TorchSpec wrote midlayer.* before "
                "its PR #134, SpecForge has no MLA drafters, ModelOpt writes layers.0.*",
            ]
        if mid:
            return "specforge", [spelled, "aux ids only in eagle_config (SpecForge writes C-out there)"]
        raise _ambiguous(
            {
                "torchspec": f"{spelled} + nested aux ids, no {TORCHSPEC_MARKER}",
                "modelopt": f"{spelled} + nested aux ids, no eagle_config.next_layer_regular",
            }
        )
    arch = architecture(cfg)
    if mid and arch != RESEARCH_ARCH and AUX_KEY not in cfg and "t2d" in names:
        # docs/formats.md §6.3: LlamaForCausalLMEagle3 + midlayer.* + both maps is SpecForge's output; without
        # aux ids the vllm reading is identical, so this names the producer, it does not change the meaning
        why = "unpruned vocabulary" if not pruned else "no aux ids (SpecForge leaves them to the target defaults)"
        return "specforge", [f"class {arch}", spelled, f"d2t and t2d with {why}: SpecForge always ships both"]
    variant = "EAGLE research class LlamaForCausalLM" if arch == RESEARCH_ARCH else f"class {arch}"
    ids = "top-level C-in aux ids" if AUX_KEY in cfg else "no aux ids (target defaults)"
    return "vllm", [variant, spelled, ids, "no speculators/TorchSpec/ModelOpt marker"]


def _ambiguous(candidates: dict[str, str]) -> EaglehubError:
    listed = "; ".join(f"{n} ({why})" for n, why in candidates.items())
    err = EaglehubError(
        f"ambiguous drafter format, candidates: {listed}",
        hint=f"name the source format with --from {' | --from '.join(candidates)}",
        code="E-INPUT-AMBIGUOUS",
    )
    err.candidates = list(candidates)
    return err


def _given_format(fmt: str, raw: dict, index: TensorIndex, recorded: str | None) -> tuple[str, list[str]]:
    """``--from fmt``: settles ambiguity between candidates, never overrides what the evidence says
    (reading a flat config as speculators, or a SpecForge one as ModelOpt, would change the model)."""
    if fmt not in FORMATS:
        raise EaglehubError(f"unknown format {fmt!r}", hint=f"use one of {', '.join(FORMATS)}")
    try:
        detected, evidence = detect(raw, index, recorded)
    except EaglehubError as exc:
        candidates = getattr(exc, "candidates", [])
        if fmt in candidates:
            return fmt, [f"given with --from {fmt} (candidates: {', '.join(candidates)})"]
        raise EaglehubError(
            f"--from {fmt} is not among the candidates ({', '.join(candidates)})", hint=exc.hint
        ) from exc
    if detected != fmt:
        raise EaglehubError(
            f"--from {fmt} contradicts the evidence: this checkpoint reads as {detected} ({'; '.join(evidence)})",
            hint="drop --from; it only settles ambiguous input",
        )
    return fmt, evidence


def place_settings(raw: dict, settings: dict | None) -> dict | None:
    """``--set`` keys written where the engines read them (docs/profiles.md §1). Speculators: a model key (not
    one the adapter copies from the top level, not the format's own) goes inside ``transformer_layer_config``,
    since vLLM's speculators adapter drops every other top-level key. Flat configs: a key the engines read from
    ``eagle_config`` first (``norm_before_fc``: vLLM and SGLang) is written there too when the config stores it
    there; the top-level (C-in) aux ids also go to a stored nested list, translated to C-out, which is the one
    SGLang reads. Dotted keys stay as given."""
    from eaglehub.formats.speculators import PRIVATE, TOP_LEVEL

    if not settings:
        return settings
    if isinstance(raw.get("speculators_config"), dict):
        return {
            (f"transformer_layer_config.{k}" if "." not in k and k not in TOP_LEVEL and k not in PRIVATE else k): v
            for k, v in settings.items()
        }
    nested = nested_config(raw)
    out = dict(settings)
    for k, v in settings.items():
        if k == "norm_before_fc" and k in nested:
            out[f"eagle_config.{k}"] = v
        elif k == AUX_KEY and AUX_KEY in nested and isinstance(v, list) and all(isinstance(i, int) for i in v):
            out[f"eagle_config.{AUX_KEY}"] = [i - 1 for i in v]
    return out


def read_drafter(
    path: Path,
    index: TensorIndex | None = None,
    fmt: str | None = None,
    aux_convention: str | None = None,
    strict_provenance: bool = True,
    settings: dict | None = None,
) -> Drafter:
    """Read a drafter directory from headers only into the canonical :class:`Drafter`.

    ``fmt`` names the source format (skips detection, resolves ambiguity); ``aux_convention``
    (``C-in``/``C-out``) overrides the convention of stored aux ids. Rejected kinds keep their stored
    names. A broken ``eaglehub.json`` raises, unless ``strict_provenance`` is false: then it is left
    out and kept in :attr:`Drafter.provenance_error` (validate reports it and checks the rest).
    ``settings`` (:mod:`eaglehub.drafter.settings`) are config edits applied before anything is read
    from the config: the drafter as it would be with those edits (the files are not touched).
    Raises: EaglehubError (missing/unreadable config or weights, ambiguous format: exit 2).
    """
    from eaglehub.io.provenance import read_provenance

    path = Path(path)
    from eaglehub.drafter.settings import apply_settings

    stored = read_config(path)
    raw, _changes = apply_settings(stored, place_settings(stored, settings))
    index = index or read_index(path)
    prov_error = None
    try:
        prov = read_provenance(path)
    except EaglehubError as exc:
        if strict_provenance:
            raise
        prov, prov_error = None, exc
    recorded = ((prov or {}).get("conversion") or {}).get("format")
    # the layout is the stored checkpoint's: an edit that adds a key another layout keeps (top-level aux ids on
    # a SpecForge config) changes what the config says, not which producer wrote the files; only a checkpoint
    # that is not a drafter as stored is judged by what the edits make of it
    seen = stored if settings else raw
    if fmt is not None:
        name, evidence = _given_format(fmt, seen, index, recorded)
    else:
        name, evidence = detect(seen, index, recorded)
    if settings and name in REJECTED:
        name, evidence = _given_format(fmt, raw, index, recorded) if fmt is not None else detect(raw, index, recorded)
    carried = dict((prov or {}).get("carried") or {})
    target = (prov or {}).get("target")
    if name in FORMATS:
        reading: Reading = FORMATS[name].read(raw, index.names(), aux_override=aux_convention)
        carried[name] = reading.carried
        target = reading.target or target
        cfg, aux = reading.config, reading.aux
        names = FORMATS[name].canonical_names(index.names(), reading.carried)
    else:
        cfg, names = raw, {n: n for n in index.names()}
        from eaglehub.drafter.canonical import read_aux

        aux = read_aux(raw)
    return Drafter(
        path,
        name,
        cfg,
        derive_dims(cfg),
        aux,
        read_flags(cfg),
        index,
        names,
        raw_config=raw,
        evidence=evidence,
        carried=carried,
        target=target,
        provenance=prov,
        provenance_error=prov_error,
    )


__all__ = [
    "C_OUT",
    "FORMATS",
    "FORMAT_NAMES",
    "LLAMA_EAGLE3_ARCHS",
    "MLA_ARCHS",
    "QWEN3_ARCHS",
    "REJECTED",
    "RESEARCH_ARCH",
    "Format",
    "Loss",
    "architecture",
    "detect",
    "read_drafter",
]
