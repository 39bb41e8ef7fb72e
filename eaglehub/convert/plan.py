"""The conversion plan: the source drafter (repaired by :mod:`eaglehub.convert.source`) upgraded or folded, and laid out
in the output format."""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from eaglehub.drafter.canonical import (
    AUX_KEY,
    C_OUT,
    Drafter,
    read_flags,
)
from eaglehub.errors import EaglehubError
from eaglehub.formats.registry import FORMATS, Loss
from eaglehub.io.provenance import make_provenance
from eaglehub.io.stformat import DTYPE_BY_TORCH
from eaglehub.io.streaming import OutTensor

if TYPE_CHECKING:
    from eaglehub.vocab.maps import Rebuilt


def tensor_bytes(t, code: str) -> bytes:
    """A torch tensor's values as little-endian bytes of safetensors dtype ``code`` (e.g. ``"BF16"``)."""
    import torch

    from eaglehub.io.stformat import DTYPES

    torch_name = DTYPES[code].torch
    assert torch_name is not None, code  # float codes only, each has a torch dtype
    return t.detach().to(getattr(torch, torch_name)).contiguous().cpu().view(torch.uint8).numpy().tobytes()


def _upgrade(
    d: Drafter, norm_output: bool, gains: list | None = None
) -> tuple[Drafter, dict[str, OutTensor], list[dict]]:
    """The 3.1 view of ``d``: flags set, ``fc_norm.{i}.weight`` = ones ``[Ht]`` in ``fc``'s dtype, or
    ``gains[i]`` (calibrated, :mod:`eaglehub.convert.calibrate`)."""
    if d.is_31:
        raise EaglehubError(
            f"{d.path} is already an EAGLE-3.1 drafter (fc_norm/norm_output set or fc_norm.* tensors present)",
            hint="drop --to to change only the format",
        )
    fc = d.tensors["fc.weight"]
    code = DTYPE_BY_TORCH[fc.dtype].code
    if code not in ONE:
        raise EaglehubError(
            f"fc.weight is {fc.dtype}; fc_norm weights need a float dtype",
            hint="upgrade the unquantized drafter, then quantize",
        )
    Ht = d.dims.Ht
    assert Ht is not None  # the source passed validation (_source_errors)
    added = {
        f"fc_norm.{i}.weight": OutTensor(
            f"fc_norm.{i}.weight",
            code,
            (Ht,),
            Ht * len(ONE[code]),
            data=ONE[code] * Ht if gains is None else tensor_bytes(gains[i], code),
        )
        for i in range(d.dims.A)
    }
    updates = {"fc_norm": True, "norm_output": norm_output}
    changes = [{"key": k, "old": d.config.get(k), "new": v} for k, v in updates.items() if d.config.get(k) != v]
    cfg = {**d.config, **updates}
    view = replace(d, config=cfg, flags=read_flags(cfg), names={**d.names, **{n: n for n in added}})
    return view, added, changes


def _downgrade(d: Drafter) -> tuple[Drafter, list[dict]]:
    """The EAGLE-3 view of a 3.1 drafter: ``fc_norm.*`` dropped, ``fc_norm``/``norm_output`` off (the
    folded ``fc.weight`` comes in ``replaced``, :func:`eaglehub.convert.calibrate.fold_to_eagle3`)."""
    updates = {"fc_norm": False, "norm_output": False}
    changes = [
        {"key": k, "old": d.config.get(k), "new": v} for k, v in updates.items() if d.config.get(k) not in (None, v)
    ]
    cfg = {k: v for k, v in d.config.items() if k not in updates}
    names = {c: n for c, n in d.names.items() if not c.startswith("fc_norm.")}
    return replace(d, config=cfg, flags=read_flags(cfg), names=names), changes


def _apply_losses(d: Drafter, losses: list[Loss], fmt: str, force: bool) -> tuple[Drafter, list[dict]]:
    fatal = [l for l in losses if l.fatal]
    if fatal or (losses and not force):
        listed = "; ".join(l.what for l in losses)
        raise EaglehubError(
            f"{fmt} cannot express this drafter: {listed}",
            hint="choose another --format"
            if fatal
            else "choose another --format, or pass --force to drop it (recorded in eaglehub.json)",
            exit_code=1,
        )
    cfg, names = dict(d.config), dict(d.names)
    for loss in losses:
        for k in loss.keys:
            if k == "num_hidden_layers":
                cfg[k] = FORMATS[fmt].max_layers
            else:
                cfg.pop(k, None)
        for t in loss.tensors:
            names.pop(t, None)
    return replace(d, config=cfg, flags=read_flags(cfg), names=names), [
        {"what": l.what, "tensors": list(l.tensors), "keys": list(l.keys)} for l in losses
    ]


def _source_tensor(d: Drafter, canonical: str, stored: str) -> OutTensor:
    info = d.tensors[canonical]
    code = info.st_dtype or DTYPE_BY_TORCH[info.dtype].code
    if info.offset is not None:
        return OutTensor(
            stored, code, info.shape, info.nbytes, src_file=d.index.root / info.file, src_offset=info.offset
        )

    def buffer(name=canonical):  # pytorch_model.bin: one mmap'd tensor at a time
        import torch

        return d.load(name).contiguous().reshape(-1).view(torch.uint8).numpy()

    return OutTensor(stored, code, info.shape, info.nbytes, buffer=buffer)


def _replaced_tensor(d: Drafter, canonical: str, stored: str, value) -> OutTensor:
    info = d.tensors[canonical]
    code = info.st_dtype or DTYPE_BY_TORCH[info.dtype].code
    if tuple(value.shape) != tuple(info.shape):
        raise EaglehubError(
            f"internal error: new {canonical} has shape {tuple(value.shape)}, the source {tuple(info.shape)}",
            exit_code=1,
        )
    return OutTensor(stored, code, info.shape, info.nbytes, data=tensor_bytes(value, code))


def _identity_or_refuse(d: Drafter, fmt: str, rebuilt: Rebuilt | None) -> None:
    """A d2t the output leaves out (a full vocabulary) must be the identity: any other one says lm_head's rows are
    in another order than the target ids, and leaving it out would score every draft row as another token."""
    import numpy as np

    if rebuilt is not None:
        moved = bool((rebuilt.ids != np.arange(len(rebuilt.ids))).any())
    else:
        moved = bool(np.asarray(d.index.load_numpy(d.names["d2t"])).any())
    if moved:
        raise EaglehubError(
            f"{d.path}: d2t is not the identity although the vocabulary is full (draft_vocab_size = vocab_size = "
            f"{d.dims.V}): lm_head row i scores target id i + d2t[i], and {fmt} stores no map for a full "
            "vocabulary (vLLM has no map parameter then), so leaving d2t out would score each row as another token",
            hint="export lm_head with its rows in target-id order (row i = token i) from the training checkpoint",
            exit_code=1,
        )


def _vocab_maps(
    d: Drafter, fmt: str, original: set[str], rebuilt: Rebuilt | None = None
) -> tuple[dict[str, OutTensor], list[str], list[str]]:
    """Maps to synthesise and maps to omit for ``fmt`` (docs/formats.md §2): identity maps when
    ``Vd == V``; ``t2d`` from ``d2t``. Both are derivable, so adding or omitting them loses nothing
    (the source passed the d2t/t2d consistency checks). ``rebuilt`` (``--rebuild-vocab-maps``): every map the
    format writes is made from those ids, none copied, and ``t2d`` is written wherever the format may hold it."""
    V, Vd = d.dims.V, d.dims.Vd
    assert V is not None and Vd is not None  # the source passed validation (_source_errors)
    want_d2t, want_t2d = FORMATS[fmt].wants_maps(V, Vd, original | ({"t2d"} if rebuilt is not None else set()))
    new, omit = {}, []
    if "d2t" in d.names and not want_d2t:
        _identity_or_refuse(d, fmt, rebuilt)
        omit.append("d2t")
    if "t2d" in d.names and not want_t2d:
        omit.append("t2d")
    if rebuilt is not None:
        if want_d2t:
            new["d2t"] = OutTensor("d2t", "I64", (Vd,), 8 * Vd, data=rebuilt.d2t().astype("<i8").tobytes())
        if want_t2d:
            new["t2d"] = OutTensor("t2d", "BOOL", (V,), V, data=rebuilt.t2d(V).tobytes())
        return new, omit, sorted(new)
    if want_d2t and "d2t" not in d.names:  # only reachable with Vd == V: the identity map
        new["d2t"] = OutTensor("d2t", "I64", (Vd,), 8 * Vd, data=bytes(8 * Vd))
    if want_t2d and "t2d" not in d.names:
        import numpy as np

        mask = np.zeros(V, dtype=np.bool_)
        if "d2t" in d.names:
            d2t = d.index.load_numpy(d.names["d2t"]).astype(np.int64)
            mask[np.arange(Vd, dtype=np.int64) + d2t] = True
        else:
            mask[:] = True
        new["t2d"] = OutTensor("t2d", "BOOL", (V,), V, data=mask.tobytes())
    return new, omit, sorted(new)


def verifier_target(recorded: dict | None, verifier: str | None) -> dict | None:
    """The target the output names: the recorded one, or ``--verifier`` (whose architectures replace a recorded
    other target's), with its ``architectures`` looked up where that can be done offline
    (:func:`verifier_architectures`) when nothing records them."""
    target = dict(recorded) if recorded else None
    if verifier:
        same = (target or {}).get("name_or_path") == verifier
        target = {**(target or {}), "name_or_path": verifier}
        if not same:
            target.pop("architectures", None)
    if target and target.get("name_or_path") and not target.get("architectures"):
        archs = verifier_architectures(target["name_or_path"])
        if archs:
            target["architectures"] = archs
    return target


def verifier_architectures(spec: str) -> list[str] | None:
    """The classes of target ``spec`` without the network: a local model directory's config, the config of a
    Hub id already in the local Hugging Face cache, or eaglehub's own SmolLM2 target (``LlamaForCausalLM``,
    what :func:`eaglehub.target.build_smollm2_cache` writes). ``None`` when none of them knows."""
    from pathlib import Path

    from eaglehub.io.jsonio import read_object
    from eaglehub.target import SMOLLM2_REPO, hub_id

    local = Path(spec).expanduser() / "config.json"
    config: Path | None = local
    if not local.is_file():
        repo = hub_id(spec)
        if repo == SMOLLM2_REPO:
            return ["LlamaForCausalLM"]
        config = None
        if repo:
            from huggingface_hub import try_to_load_from_cache

            try:
                cached = try_to_load_from_cache(repo, "config.json")
            except ValueError:  # an id huggingface_hub refuses has nothing cached under it
                cached = None
            config = Path(cached) if isinstance(cached, str) else None
    archs = (read_object(config) or {}).get("architectures")
    return list(archs) if isinstance(archs, list) and archs and all(isinstance(a, str) for a in archs) else None


def aux_warnings(d: Drafter) -> list[str]:
    """Say when the C-in/C-out decision for nested ids rests on a guess (docs/formats.md §3): the ids
    matched no rule and the producer's convention was assumed, or a rule overrode it."""
    aux = d.aux
    if not (aux.key or "").startswith("eagle_config.") or aux.reason == "given with --aux-convention":
        return []
    producer = C_OUT if getattr(FORMATS.get(d.format), "nested_ids", False) else None
    fix = "pass --aux-convention c-in|c-out if that is wrong"
    if "producer's convention" in aux.reason:
        return [f"aux-layer ids {aux.raw} match no rule; assumed {aux.convention}, {d.format}'s convention ({fix})"]
    if producer and aux.convention != producer:
        return [
            f"aux-layer ids {aux.raw} read as {aux.convention} ({aux.reason}) although {d.format} writes {producer} ({fix})"
        ]
    return []


def _aux_plan(d: Drafter, fmt: str) -> dict:
    aux = d.aux
    out_nested = getattr(FORMATS[fmt], "nested_ids", False)
    plan = {
        "source_key": aux.key,
        "source_convention": aux.convention,
        "c_in": aux.c_in,
        "output_key": (f"eagle_config.{AUX_KEY}" if out_nested else AUX_KEY) if aux.raw is not None else None,
    }
    if aux.raw is not None and aux.c_in is None:
        raise EaglehubError(
            f"cannot tell whether the aux-layer ids {aux.raw} ({aux.key}) are C-in or C-out ({aux.reason})",
            hint="name the convention with --aux-convention c-in|c-out (docs/formats.md §3)",
            exit_code=1,
        )
    return plan


def _drop_defaulted(cfg: dict, fmt: str, original_keys: set[str]) -> None:
    """Remove keys a writer added on the way (not in the original) that hold the reader's default."""
    for k, default in DEFAULTED_KEYS.items():  # speculators keeps both at its top level too
        if k in cfg and k not in original_keys and cfg[k] == default(fmt):
            cfg.pop(k)


@dataclass
class Plan:
    """Everything a conversion writes, decided before anything is written."""

    view: Drafter  # the canonical drafter as it will be written (upgraded, forced drops applied)
    format: str
    added: dict[str, OutTensor]  # canonical name -> new tensor (3.1 fc_norm weights)
    changes: list[dict]
    dropped: list[dict]
    aux: dict
    omitted: list[str]
    synthesized: list[str]
    config: dict
    tensors: list[OutTensor]  # in write order
    stored: dict[str, str]  # canonical -> stored name
    provenance: dict


def plan_conversion(
    d: Drafter,
    view: Drafter,
    source: dict,
    to: str | None,
    out_fmt: str,
    force: bool,
    norm_output: bool,
    verifier: str | None,
    gains: list | None = None,
    replaced: dict | None = None,
    rebuilt: Rebuilt | None = None,
) -> Plan:
    """Everything the write needs, computed from headers and config only (plus ``d2t`` when a format
    needs ``t2d`` derived): the output config, the tensor list, the provenance document.
    ``gains``/``replaced``: calibrated ``fc_norm`` gains and fine-tuned tensors (canonical name →
    torch tensor, written in the source tensor's dtype instead of its bytes)."""
    view, added, changes = _upgrade(view, norm_output, gains) if to == "3.1" else (view, {}, [])
    folded = []
    if to == "3":
        folded = [
            {
                "what": "EAGLE-3.1 fc_norm (folded into fc.weight: each aux chunk's columns x gain / mean RMS, an "
                "approximation) and its switches",
                "tensors": sorted(n for n in view.names if n.startswith("fc_norm.")),
                "keys": sorted(k for k in ("fc_norm", "norm_output") if k in view.config),
            }
        ]
        view, changes = _downgrade(view)
    view, dropped = _apply_losses(view, FORMATS[out_fmt].losses(view), out_fmt, force)
    dropped = folded + dropped
    aux_plan = _aux_plan(view, out_fmt)
    target = verifier_target(view.target, verifier)
    if out_fmt == "speculators" and not (target or {}).get("name_or_path"):
        raise EaglehubError(
            "the speculators format names its verifier (target), and this drafter does not record one",
            hint="pass --verifier ORG/NAME (the target the drafter was trained for)",
        )
    original = (d.provenance or {}).get("original") or {
        "tensors": sorted(d.names),
        "config_keys": sorted(d.config),
    }
    maps, omitted, synthesized = _vocab_maps(view, out_fmt, set(original["tensors"]), rebuilt)
    writer, carried = FORMATS[out_fmt], dict(view.carried)
    cfg = writer.write_config(view, carried.get(out_fmt, {}), target)
    _drop_defaulted(cfg, out_fmt, set(original["config_keys"]))
    # in source byte order, so consecutive tensors go out in one kernel copy
    canon = sorted(
        (n for n in view.names if n not in omitted and n not in added and n not in maps),
        key=lambda n: (view.tensors[n].file, view.tensors[n].offset or 0),
    )
    stored = writer.stored_names([*canon, *added, *maps], carried.get(out_fmt, {}))
    tensors = [
        _source_tensor(view, n, stored[n])
        if n not in (replaced or {})
        else _replaced_tensor(view, n, stored[n], (replaced or {})[n])
        for n in canon
    ]
    tensors += [replace(t, name=stored[n]) for n, t in {**added, **maps}.items()]
    prov = make_provenance(
        {**source, "format": d.format, "version": d.version},
        {
            "format": out_fmt,
            "version": to or ("3.1" if d.is_31 else "3"),
            "added_tensors": sorted(added),
            "synthesized_tensors": synthesized,
            "omitted_tensors": sorted(omitted),
            "replaced_tensors": sorted(replaced or {}),
            "dropped": dropped,
            "aux": aux_plan,
        },
        carried,
        target,
        original,
        d.provenance,
    )
    nested = cfg["eagle_config"] if isinstance(cfg.get("eagle_config"), dict) else {}
    own_nested = (aux_plan["output_key"] or "").startswith("eagle_config.")
    aux_plan["output_ids"] = (nested if own_nested else cfg).get(AUX_KEY) if aux_plan["output_key"] else None
    other = (cfg if own_nested else nested).get(AUX_KEY) if aux_plan["output_key"] else None
    if other is not None:  # the source's list for the other engines, kept as stored (FlatFormat.write_config)
        aux_plan["kept"] = {"key": AUX_KEY if own_nested else f"eagle_config.{AUX_KEY}", "ids": other}
    return Plan(
        view,
        out_fmt,
        added,
        changes,
        dropped,
        aux_plan,
        sorted(omitted),
        synthesized,
        cfg,
        tensors,
        stored,
        prov,
    )


def calibration_provenance(report: dict) -> dict:
    """What ``eaglehub.json`` keeps of a calibration report: target, prompts, norm_output, fine-tuning
    and the held-out acceptance lengths (the full report stays in the convert report)."""
    return {
        "target": report["target"],
        "prompts": report["prompts"],
        "norm_output": report["norm_output"]["chosen"],
        "fine_tuning": report["fine_tuning"],
        "held_out_acceptance_length": {
            k: v["acceptance_length"] for k, v in report["acceptance"].items() if isinstance(v, dict)
        },
    }


#: the value 1.0 in each float dtype, little-endian (IEEE 754; bf16 = the top half of f32).
ONE = {
    "F64": struct.pack("<d", 1.0),
    "F32": struct.pack("<f", 1.0),
    "F16": struct.pack("<e", 1.0),
    "BF16": b"\x80\x3f",
}


#: config keys a writer may add that mean nothing new when they hold the reader's default.
#: ``None`` = the format wants the key stated (vLLM-native: the aux count next to the ids, docs/formats.md §7).
DEFAULTED_KEYS = {
    "num_aux_hidden_states": lambda fmt: None if fmt == "vllm" else 3,
    "norm_before_residual": lambda fmt: fmt == "speculators",
}
