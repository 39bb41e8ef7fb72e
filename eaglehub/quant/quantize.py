"""``eaglehub quantize SRC DST --scheme fp8-dynamic|fp8-block``: FP8 drafters in the compressed-tensors
layout vLLM loads (docs/quantization.md §2–§5).

**What is quantized.** The Linear modules vLLM builds under the drafter's quantization config
(:func:`eaglehub.drafter.quant_layers.vllm_layers`: ``qkv_proj``, ``o_proj``, ``gate_up_proj``, ``down_proj``, MLA's
``fused_qkv_a_proj``, ``q_b_proj``, ``kv_b_proj``, and ``fc`` unless kept), decided the way vLLM decides
(:func:`eaglehub.drafter.quant_layers.decide_layer` against the ignore list written, for every target layer count):
all shards of a fused layer or none. ``lm_head``, ``embed_tokens``, every norm (``fc_norm.{i}``,
``input_norm``), ``d2t`` (int64) and ``t2d`` (bool) keep their bytes: vLLM builds them unquantized.

**Schemes** (compressed-tensors presets, ``preset_name_to_scheme``):

* ``fp8-dynamic`` (``FP8_DYNAMIC``): ``X.weight`` float8_e4m3fn ``[out, in]``, ``X.weight_scale [out, 1]``
  in the weight's dtype (per output channel, ``max|w| / 448``), activations quantized per token at run time;
* ``fp8-block`` (``FP8_BLOCK``): ``X.weight_scale [⌈out/128⌉, ⌈in/128⌉]``, activations per group of 128.
  vLLM refuses a fused layer one of whose shards but the last has rows that are not a multiple of 128
  (``validate_fp8_block_shape`` in ``vllm/model_executor/layers/quantization/utils/fp8_utils.py``: "Weight
  output_partition_size = 64 is not divisible by weight quantization block_n = 128"), so such layers are
  kept unquantized and listed (``kept_not_block_divisible``). vLLM's CPU block-FP8 kernels also need AMX
  tiles (docs/quantization.md, "Seen on a CPU machine").

**How.** Route 1 of docs/quantization.md §4: per weight a bias-free ``nn.Linear``,
``initialize_module_for_quantization``, scales from ``calculate_qparams`` on the row (or block) min/max,
status FROZEN, then the library's float-quantized compressor (``compress_module``). ``quantization_config``
is written here, with anchored ``re:`` ignore entries (``ModelCompressor.update_config`` would write bare
names, which never match vLLM's prefixed ``model.fc``; §3) and checked against the module names vLLM
builds before anything is written.

**Streaming and atomic** like :mod:`eaglehub.convert.run` (whose plan, writer and output check are reused):
kept tensors are copied byte for byte, each quantized weight is loaded, quantized and written one at a
time; the output is written into a temporary directory, re-read, validated (the E-QUANT checks of
:mod:`eaglehub.checks.quant`) and renamed into place; the source is never modified. The output is the
vLLM-native layout (speculators' adapter is not known to keep a quantization config, §5). Provenance:
``eaglehub.json`` ``conversion.quantization`` (scheme, ignore list, what was kept and why).

:func:`dequantize_tensors` is the reverse (the reference engine runs quantized drafters through it).
"""

from __future__ import annotations

import functools
import importlib.util
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from eaglehub.errors import EaglehubError
from eaglehub.io.atomic import atomic_dir
from eaglehub.io.streaming import OutTensor
from eaglehub.quant.plan import KEEP_FC, QuantPlan, plan_quantization
from eaglehub.quant.weights import SCHEMES, compressed_tensors_version, quantize_weight

REPORT_SCHEMA = "eaglehub.quantize-report/1"


def _plan_checkpoint(d, repaired, source: dict, plan: QuantPlan, scheme: str, keep_fc: bool):
    """The convert plan of the vLLM-native layout (:func:`eaglehub.convert.run.plan_conversion`) with each quantized weight replaced
    by its float8 payload + scale (computed when written: one tensor in memory at a time) and the quantization
    config and provenance added. Returns ``(convert plan, tensors to write, stored names expected)``."""
    from eaglehub.convert.plan import plan_conversion
    from eaglehub.io.stformat import DTYPE_BY_TORCH

    cp = plan_conversion(d, repaired, source, None, "vllm", False, True, None)
    by_name = {e.canonical: e for e in plan.entries}
    quantizer = _Quantizer(d, scheme)
    canonical_of = {s: c for c, s in cp.stored.items()}
    tensors, expected = [], set(cp.stored.values())
    for t in cp.tensors:
        e = by_name.get(canonical_of.get(t.name, ""))
        if e is None or not e.quantized:
            tensors.append(t)
            continue
        assert e.scale_shape is not None  # set for every quantized entry
        scale_name = t.name.removesuffix(".weight") + ".weight_scale"
        tensors.append(
            OutTensor(
                t.name,
                "F8_E4M3",
                e.shape,
                math.prod(e.shape),
                buffer=functools.partial(quantizer.part, e.canonical, 0),
            )
        )
        tensors.append(
            OutTensor(
                scale_name,
                DTYPE_BY_TORCH[e.dtype].code,
                e.scale_shape,
                e.scale_bytes,
                buffer=functools.partial(quantizer.part, e.canonical, 1),
            )
        )
        expected.add(scale_name)
    cp.config["quantization_config"] = plan.config
    cp.provenance["conversion"]["quantization"] = {
        "scheme": scheme,
        "compressed_tensors_preset": SCHEMES[scheme],
        "compressed_tensors_version": compressed_tensors_version(),
        "ignore": plan.ignore,
        "keep_fc": keep_fc,
        "quantized_tensors": [e.stored for e in plan.entries if e.quantized],
        "kept_not_block_divisible": [x["layer"] for x in plan.not_divisible],
    }
    return cp, tensors, expected


SOURCE_VALUE_CODES = frozenset({"E-TENSOR-ZERO", "E-TENSOR-NONFINITE"})
"""Value findings of a quantized output whose cause is the source's values (quantization makes neither)."""


def _judge_output(written: Path, judged, shown: Path) -> list[dict]:
    """The written output's findings for the judged profiles (``judged``: validate's Options); refuses on an error.

    Raises:
        EaglehubError: an error finding for a judged profile (exit 1): nothing is written.
    """
    from eaglehub.checks.validate import run_checks
    from eaglehub.formats.registry import read_drafter

    # deep: quantize has read every weight already, and a zero gain or an all-zero FP8 block loads without a word
    # in every engine (checks/zeros.py): an output judged on its headers alone would be called fit while it
    # accepts nothing
    found = run_checks(read_drafter(written, fmt="vllm"), deep=True, options=judged)
    errors = [f for f in found if f.severity == "error"]
    if errors:
        titles = "; ".join(p.title for p in judged.engine_profiles() if any(p.id in (f.profiles or ()) for f in errors))
        # an all-zero or non-finite tensor was so in the source (quantizing keeps a zero a zero, and its scales
        # are finite): the source is named as the cause, not the quantization
        inherited = all(f.code in SOURCE_VALUE_CODES for f in errors)
        raise EaglehubError(
            (
                "the source already fails validation, so its quantized copy does"
                if inherited
                else "the quantized drafter fails validation"
            )
            + (f" on {titles}" if titles else "")
            + ": "
            + ", ".join(f"{f.code} {f.subject}" for f in errors)
            + f"; {shown} was not written",
            hint=errors[0].hint or "quantize for another --profile, or fix the source first",
            exit_code=1,
        )
    return [f.as_dict() for f in found]


class _Quantizer:
    """Quantizes one weight when its payload is written and hands out its scale next (the writer asks for the
    weight, then its scale): memory holds one Linear at a time."""

    def __init__(self, d, scheme: str):
        self.d, self.scheme = d, scheme
        self.cache: dict[str, tuple] = {}

    def part(self, canonical: str, i: int):
        import torch

        if canonical not in self.cache:
            weight = self.d.load(canonical)
            if not torch.isfinite(weight).all():
                # a NaN / inf would become the row's scale and poison every weight of the row
                raise EaglehubError(
                    f"{canonical} holds non-finite values: nothing was written",
                    exit_code=1,
                    hint=f"eaglehub validate --deep {self.d.path} names them (E-TENSOR-NONFINITE); "
                    "fix the source checkpoint first",
                )
            self.cache = {canonical: quantize_weight(weight, self.scheme)}
        return self.cache[canonical][i].reshape(-1).view(torch.uint8).numpy()


def quantize(
    src: str | Path,
    dst: str | Path | None,
    scheme: str = "fp8-dynamic",
    ignore: Sequence[str] = (),
    keep_fc: bool = KEEP_FC,
    overwrite: bool = False,
    dry_run: bool = False,
    revision: str | None = None,
    profiles: Sequence[str] = (),
) -> dict:
    """Quantize drafter ``src`` (directory or hub repo id; any format eaglehub reads, Llama-style or MLA, EAGLE-3 or
    3.1) into ``dst`` in the compressed-tensors FP8 layout vLLM loads, and return the report
    (``schemas/quantize-report.schema.json``): per tensor quantized or kept (with the reason), tensor bytes before and
    after and their ratio, the layers kept because their shapes do not fit 128×128 blocks, the written
    ``quantization_config`` and the output path. ``ignore``: extra modules to keep (``re:<regex>`` matched from the
    start of vLLM's module name, e.g. ``model.layers.32.mlp.down_proj``, or a module name such as ``down_proj``);
    ``keep_fc``: keep ``fc`` unquantized (default :data:`KEEP_FC`); ``dry_run``: plan only, nothing is written
    (``dst`` may be ``None``). ``profiles``: the engine profiles the output is judged for before it appears (default
    :data:`eaglehub.profiles.DEFAULT_PROFILE`): an error finding for any refuses it, the others are reported under
    ``findings`` (``None`` in a dry run: nothing was written, nothing judged).

    Raises:
        EaglehubError: an unknown scheme or profile, ``dst`` missing, existing without ``overwrite``, the source or
            inside it, compressed-tensors not installed (exit 2); a source with error findings, already quantized,
            with nothing to quantize, or an output that fails validation for a judged profile (exit 1; ``dst``
            untouched).
    """
    from eaglehub.checks.validate import Options, profiles_section
    from eaglehub.convert.source import refuse_source_errors, repair_config
    from eaglehub.convert.write import destination, write_drafter
    from eaglehub.formats.registry import read_drafter
    from eaglehub.io.schemas import check_output
    from eaglehub.io.source import resolve_source

    if scheme not in SCHEMES:
        raise EaglehubError(f"unknown scheme {scheme!r}", hint=f"use --scheme {' | '.join(SCHEMES)}")
    judged = Options(profiles=tuple(profiles) or None)
    judged.engine_profiles()  # an unknown --profile is a usage error, before any work
    if dst is None and not dry_run:
        raise EaglehubError("DST is missing", hint="pass the output directory, or --dry-run to only plan")
    if importlib.util.find_spec("compressed_tensors") is None:
        raise EaglehubError("quantize needs compressed-tensors (and torch)", hint="pip install 'eaglehub[quant]'")
    path, source = resolve_source(str(src), revision)
    out_dir = destination(path, Path(dst), overwrite) if dst is not None else None
    d = read_drafter(path)
    if d.config.get("quantization_config") is not None or any(
        i.dtype not in ("float16", "bfloat16", "float32", "float64", "int64", "bool") for i in d.tensors.values()
    ):
        raise EaglehubError(f"{path} is already quantized", hint="quantize the unquantized drafter", exit_code=1)
    repaired, _ = repair_config(d)
    refuse_source_errors(repaired)
    plan = plan_quantization(repaired, scheme, ignore, keep_fc)
    cp, tensors, expected = _plan_checkpoint(d, repaired, source, plan, scheme, keep_fc)
    stored = dict(cp.stored.items())
    entries = [replace(e, stored=stored.get(e.canonical, e.canonical)) for e in plan.entries]
    before, after = sum(e.bytes_before for e in entries), sum(e.bytes_after for e in entries)
    report: dict[str, Any] = {
        "schema": REPORT_SCHEMA,
        "source": str(src),
        "source_format": d.format,
        "version": d.version,
        "layer_kind": d.layer_kind,
        "scheme": scheme,
        "keep_fc": keep_fc,
        "dry_run": dry_run,
        "destination": None if out_dir is None else str(out_dir),
        "tensors": [e.as_dict() for e in entries],
        "layers": plan.layers,
        "kept_not_block_divisible": plan.not_divisible,
        "sizes": {
            "tensor_bytes_before": before,
            "tensor_bytes_after": after,
            "ratio": round(after / before, 4),
            "files_bytes_before": sum((d.index.root / f).stat().st_size for f in d.index.files),
            "files_bytes_after": None,
        },
        "quantization_config": plan.config,
        "files": [],
        "profiles": profiles_section(judged),
        "findings": None,
    }
    if dry_run:
        check_output(report, "quantize-report", "quantize report")
        return report
    assert out_dir is not None  # dst is required unless dry_run
    with atomic_dir(out_dir, overwrite=overwrite) as tmp:
        # the writer's own atomic directory inside ours: the output is judged for the profiles before ours
        # is renamed into place, so an output a judged engine refuses never appears
        inner = tmp / "checkpoint"
        written = write_drafter(
            path,
            inner,
            tensors=tensors,
            config=cp.config,
            provenance=cp.provenance,
            source_metadata=d.index.metadata,
            source_files=d.index.files,
            fmt="vllm",
            expected=expected,
            overwrite=False,
        )
        report["findings"] = _judge_output(inner, judged, out_dir)
        for child in inner.iterdir():
            child.rename(tmp / child.name)
        inner.rmdir()
    files = written.files
    report["sizes"]["files_bytes_after"] = written.weight_bytes
    report["files"] = files
    check_output(report, "quantize-report", "quantize report")
    return report
