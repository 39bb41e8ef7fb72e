"""``eaglehub pipeline MANIFEST``: for each drafter of a manifest, validate → convert → (quantize)
→ verify → publish, and one summary report (``schemas/pipeline-report.schema.json``).

The manifest is the pairing manifest of ``eaglehub verify --manifest`` (:mod:`eaglehub.verify.manifest`)
with optional per-drafter ``convert`` / ``quantize`` / ``verify`` / ``publish`` sections
(``schemas/manifest.schema.json#/$defs/*_stage``). Each drafter's outputs go under
``WORK/<target>--<drafter>/``: ``converted/``, ``quantized/`` and ``<checkpoint>.verify.json`` beside
the checkpoint that is published (where ``eaglehub publish`` looks for it). When the drafter is
converted or quantized, the source is verified in the same run (one target-alone baseline) so the
card and the summary show both acceptance lengths. Publishing is a dry run unless ``publish`` is
true. A failing step stops that drafter (the later steps are ``skipped``); the others go on.
"""

from __future__ import annotations

import time
from pathlib import Path

from eaglehub import __version__
from eaglehub.errors import EaglehubError
from eaglehub.io.schemas import check_output, write_output

SCHEMA = "pipeline-report"
STEPS = ("validate", "convert", "quantize", "verify", "publish")


def _step(name: str, fn) -> tuple[dict, object]:
    """Run ``fn() -> (summary, value)`` as step ``name``; an EaglehubError is the step's failure."""
    start = time.monotonic()
    try:
        summary, value = fn()
        status = "failed" if summary.pop("_failed", False) else "ok"
        error = summary.pop("_error", None)
    except EaglehubError as exc:
        summary, value, status = {}, None, "failed"
        error = exc.message + (f" (hint: {exc.hint})" if exc.hint else "")
    return {
        "name": name,
        "status": status,
        "seconds": round(time.monotonic() - start, 2),
        "summary": summary,
        "error": error,
    }, value


def _validate(pair) -> tuple[dict, None]:
    from eaglehub.checks.validate import validate

    report = validate(pair.drafter, pair.target.spec, deep=True)
    errors = sorted({f["code"] for f in report["findings"] if f["severity"] == "error"})
    warnings = sorted({f["code"] for f in report["findings"] if f["severity"] == "warning"})
    out = {"counts": report["counts"], "errors": errors, "warnings": warnings}
    if errors:
        out.update(_failed=True, _error=f"validate finds {', '.join(errors)}")
    return out, None


def _convert(src: Path, dst: Path, section: dict, target_spec: str) -> tuple[dict, Path]:
    """The manifest's ``convert`` section through the same dispatch as ``eaglehub convert``."""
    from eaglehub.convert.command import ConvertOptions, run_convert

    calibrate = bool(section.get("calibrate"))
    opts = ConvertOptions(
        # the plain 3.1 upgrade loses most of the acceptance (unit fc_norm gains); calibrating keeps it
        to=section.get("to"),
        fmt=section.get("format"),
        norm_output=section.get("norm_output"),
        calibrate=calibrate,
        target=target_spec if calibrate else None,
        calibration_limit=section.get("calibration_limit"),
        steps=section.get("calibration_steps"),
        overwrite=True,
    )
    report = run_convert(str(src), str(dst), opts)
    out = {
        "output": str(dst),
        "to": section.get("to"),
        "format": report["format"],
        "warnings": report.get("warnings", []),
    }
    cal = report.get("calibration")
    if cal:
        out["calibration"] = {
            "norm_output": cal["norm_output"]["chosen"],
            "fine_tuning_steps": (cal["fine_tuning"] or {}).get("steps", 0),
            "held_out_acceptance_length": {
                k: cal["acceptance"][k]["acceptance_length"] for k in ("source", "plain_upgrade", "calibrated")
            },
            "seconds": cal["seconds"]["total"],
        }
    return out, dst


def _quantize(src: Path, dst: Path, section: dict) -> tuple[dict, Path]:
    # lazily: quantization needs torch and compressed-tensors, the other steps do not
    from eaglehub.quant.quantize import quantize

    report = quantize(
        src,
        dst,
        scheme=section.get("scheme", "fp8-dynamic"),
        ignore=tuple(section.get("ignore", ())),
        **({"keep_fc": section["keep_fc"]} if "keep_fc" in section else {}),
        overwrite=True,
    )
    return {"output": str(dst), "scheme": report.get("scheme"), "sizes": report.get("sizes")}, dst


def _verify(pair, drafter: Path, manifest_dir: Path, report_path: Path) -> tuple[dict, Path]:
    from eaglehub.verify.options import VerifyOptions
    from eaglehub.verify.pairing import pair_settings
    from eaglehub.verify.report import write_report
    from eaglehub.verify.run import run_verify

    section = pair.stages.get("verify", {})
    prompts = section.get("prompts")
    base = VerifyOptions(target=pair.target.spec, drafters=[])
    s = pair_settings(pair, base)
    drafters = [str(drafter)] + ([str(pair.drafter)] if drafter != pair.drafter else [])
    opts = VerifyOptions(
        target=pair.target.spec,
        drafters=drafters,
        k=s["num_speculative_tokens"],
        max_tokens=section.get("max_tokens", base.max_tokens),
        prompts_file=str((manifest_dir / prompts).resolve()) if prompts else None,
        categories=list(section.get("categories", [])),
        limit=section.get("limit"),
        dtype=s["dtype"],
        max_model_len=s["max_model_len"],
        engine_options=s["engine_options"],
        engines=[section.get("engine", "auto")],
    )
    report = run_verify(opts)
    write_report(report, report_path)
    rows = [
        {
            "drafter": d["drafter"],
            "passed": d["passed"],
            "lossless": f"{d['num_prompts_matched']}/{d['num_prompts']}",
            "acceptance_length": d["acceptance"]["overall"]["acceptance_length"],
            "acceptance_rate_per_position": d["acceptance"]["overall"]["acceptance_rate_per_position"],
            "errors": sorted({f["code"] for f in d["findings"] if f["severity"] == "error"}),
        }
        for d in report["drafters"]
    ]
    out = {
        "report": str(report_path),
        "engine": report["engine"],
        "k": opts.k,
        "prompts": report["prompts"]["count"],
        "max_tokens": opts.max_tokens,
        "drafters": rows,
    }
    if not report["drafters"][0]["passed"]:
        out.update(_failed=True, _error=f"verify fails: {', '.join(rows[0]['errors'])}")
    return out, report_path


def _publish(pair, drafter: Path, report_path: Path, do_publish: bool, endpoint: str | None) -> tuple[dict, None]:
    from eaglehub.publish import PublishOptions, publish

    section = pair.stages["publish"]
    doc = publish(
        PublishOptions(
            src=str(drafter),
            repo=section["repo"],
            revision=section.get("revision", "main"),
            create_pr=section.get("pr", True),
            tag=section.get("tag"),
            private=section.get("private", False),
            dry_run=not do_publish,
            report=str(report_path),
            target=pair.target.spec,
            base_model=section.get("base_model"),
            endpoint=endpoint,
        )
    )
    changed = [f["path"] for f in doc["files"] if f["status"] != "unchanged"]
    return {
        "dry_run": doc["dry_run"],
        "repo": doc["repo"]["id"],
        "endpoint": doc["repo"]["endpoint"],
        "revision": doc["revision"],
        "create_pr": doc["create_pr"],
        "parent_commit": doc["parent_commit"],
        "files": len(doc["files"]),
        "changed": changed,
        "bytes_to_upload": doc["bytes_to_upload"],
        "card_base_model": doc["card"]["base_model"],
        "result": doc["result"],
    }, None


def run_pipeline(
    manifest: str | Path,
    work_dir: str | Path,
    publish: bool = False,
    endpoint: str | None = None,
    drafters: tuple[str, ...] = (),
    console=None,
) -> dict:
    """Run every selected drafter of ``manifest`` through its steps; returns the summary report.

    ``work_dir``: where converted / quantized checkpoints and verify reports go; ``publish``: really
    publish (default: a dry run, which reads the Hub but writes nothing); ``endpoint``: Hub endpoint
    (default huggingface_hub's); ``drafters``: only these (names or directories, as verify's
    ``--drafter``); ``console``: rich console for one status line per step.

    Raises: EaglehubError (exit 2) for a bad manifest (:func:`eaglehub.verify.manifest.load_manifest`).
    """
    from eaglehub.verify.manifest import load_manifest

    loaded = load_manifest(manifest)
    work = Path(work_dir).expanduser().resolve()
    rows = []
    for pair in loaded.pairs(None, list(drafters)):
        out_dir = work / pair.label
        steps, current, failed, report_path = [], pair.drafter, False, None

        def run(name, fn):
            nonlocal failed
            if failed:
                steps.append({"name": name, "status": "skipped", "seconds": 0.0, "summary": {}, "error": None})
                return None
            if console is not None:
                console.print(f"[bold]{pair.label}[/]: {name} …", highlight=False)
            step, value = _step(name, fn)
            steps.append(step)
            failed = step["status"] == "failed"
            return value

        run("validate", lambda: _validate(pair))
        if "convert" in pair.stages:
            current = (
                run(
                    "convert",
                    lambda: _convert(current, out_dir / "converted", pair.stages["convert"], pair.target.spec),
                )
                or current
            )
        if "quantize" in pair.stages:
            current = (
                run("quantize", lambda: _quantize(current, out_dir / "quantized", pair.stages["quantize"])) or current
            )
        final = current
        report_path = run(
            "verify",
            lambda: _verify(
                pair,
                final,
                loaded.path.resolve().parent,
                final.parent / f"{final.name}.verify.json"
                if final != pair.drafter
                else out_dir / f"{final.name}.verify.json",
            ),
        )
        if "publish" in pair.stages:
            run("publish", lambda: _publish(pair, final, report_path, publish, endpoint))
        rows.append(
            {
                "target": pair.target.name,
                "drafter": pair.name,
                "source": str(pair.drafter),
                "output": str(final),
                "steps": steps,
                "passed": not failed,
            }
        )
    summary = {
        "schema": "eaglehub.pipeline-report/1",
        "tool": {"name": "eaglehub", "version": __version__},
        "manifest": str(loaded.path),
        "work_dir": str(work),
        "publish": publish,
        "drafters": rows,
        "passed": all(r["passed"] for r in rows),
    }
    check_output(summary, SCHEMA, "pipeline report")
    return summary


def write_summary(summary: dict, path: str | Path) -> None:
    """Write the summary (schema-checked) atomically."""
    write_output(summary, path, SCHEMA, "pipeline report")


def exit_code(summary: dict) -> int:
    return 0 if summary["passed"] else 1
