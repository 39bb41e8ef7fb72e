"""The model card ``eaglehub publish`` writes as the repo's ``README.md``.

Metadata (``huggingface_hub.ModelCardData``): ``base_model`` = the target the drafter serves,
``library_name: vllm``, ``pipeline_tag: text-generation``, tags ``speculative-decoding``,
``eagle3`` / ``eagle3.1``, ``draft-model``, ``eaglehub`` and the quantization (``fp8``,
``compressed-tensors``) when there is one (docs/publishing.md §1). The body records what users
and engines need and what docs/failure-kinds.md asks ``publish`` to record: the ready ``vllm serve``
line, the measured acceptance with its settings and definitions and the engine version (F26: a
later ``verify --reference-report`` compares against the uploaded report), the acceptance curve (AL(k) at
each k up to the measured one, also in the metadata as ``eaglehub.acceptance_curve`` for ``eaglehub drafters``
to read from the Hub's search; schemas/acceptance-curve.schema.json), the aux-layer ids and
their convention (F11), the 3.1 / pre-FC norm switches (F16), the chat template the drafter was
trained with (F25), whether it ships its own ``lm_head`` (F8), how it was made (``eaglehub.json``
provenance, the quantization config), the validation result, and ``--force`` when used.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from eaglehub.engines.vllm_engine import serve_command
from eaglehub.publish.measured import card_curve, fmt, plural, verify_section
from eaglehub.publish.paths import scrub_text


def _quant(config: dict) -> dict | None:
    q = config.get("quantization_config")
    return q if isinstance(q, dict) else None


def card_tags(inspect: dict, config: dict) -> list[str]:
    tags = [
        "speculative-decoding",
        "eagle3.1" if inspect["eagle_version"] == "3.1" else "eagle3",
        "draft-model",
        "eaglehub",
    ]
    q = _quant(config)
    if q:
        tags.append(str(q.get("quant_method", "quantized")))
        text = repr(q.get("config_groups", {})).lower()
        if "'type': 'float'" in text and "'num_bits': 8" in text:
            tags.append("fp8")
    return tags


def _set(value) -> str:
    """A config value as the card writes it: a value the config leaves unset says so, never ``None``."""
    return "not set" if value is None else str(value)


def _ids(ids) -> str:
    return ", ".join(str(i) for i in ids)


def _aux_words(aux: dict, captured: tuple[str, list[int] | None] | None) -> str:
    """The aux-layer ids row: the ids the config names and their convention, or, when it names none, the
    engine's default written as a default, with the layers it comes to for the target when it is known.
    ``captured``: ``(profile title, ids its runner has the target capture or None when the target is
    unknown)`` for the drafter whose config names no ids the runner passes."""
    if captured is None:
        return f"`{aux['raw']}` via `{aux['key']}` ({aux['convention']}; vLLM reads C-in: `{aux['c_in']}`)"
    title, ids = captured
    default = (
        f"layers {_ids(ids)} for this target" if ids else "layers (2, N//2, N-3) of the target's N (target not known)"
    )
    stored = (
        f" (the config's `{aux['key']}` `{aux['raw']}` is not what it passes)" if aux.get("raw") is not None else ""
    )
    return f"engine default: {default}, as {title} captures them when the drafter names none{stored}"


def _calibration_words(conv: dict) -> str:
    """What a calibrated ``--to 3.1`` upgrade did (``conversion.calibration`` of ``eaglehub.json``): the fit and
    its held-out acceptance, the fine-tuning and its loss, the prompts it used (by file name)."""
    cal = conv.get("calibration")
    if not cal:
        return ""
    p = cal.get("prompts") or {}
    gains = ", ".join(f"`{t}`" for t in conv.get("added_tensors") or [] if t.startswith("fc_norm"))
    words = (
        f"; calibrated on {cal.get('target') or 'the target'}: {gains or 'the fc_norm gains'} fitted by least "
        f"squares per channel to the target's aux states on {plural(p.get('fit', 0), 'prompt')} "
        f"({p.get('tokens', '?')} target tokens, `{Path(p.get('file') or '?').name}`), `norm_output` {str(cal.get('norm_output')).lower()}"
    )
    tune = cal.get("fine_tuning")
    if tune:
        words += (
            f"; fine-tuned ({tune['train']}) for {plural(tune['steps'], 'step')} at lr {tune['lr']:g}, "
            f"{tune['objective']}: loss {fmt(tune.get('loss_first'))} → {fmt(tune.get('loss_last'))}"
        )
    al = cal.get("held_out_acceptance_length") or {}
    names = {
        "source": "source",
        "plain_upgrade": "plain upgrade (unit gains)",
        "closed_form": "fitted gains",
        "calibrated": "calibrated",
    }
    if al:
        shown = ", ".join(f"{names.get(k, k)} {fmt(v)}" for k, v in al.items())
        words += f"; acceptance length on {plural(p.get('held_out', 0), 'held-out prompt')} (reference engine): {shown}"
    return words


def _rewritten_words(conv: dict) -> str:
    """The trained tensors a step rewrote (a calibrated upgrade's fine-tuning, a fold), by name."""
    replaced = conv.get("replaced_tensors") or []
    if not replaced:
        return ""
    why = " by fine-tuning" if (conv.get("calibration") or {}).get("fine_tuning") else ""
    return f"; rewrote {plural(len(replaced), 'trained tensor')}{why}: " + ", ".join(f"`{t}`" for t in replaced)


def _made_section(
    inspect: dict, config: dict, provenance: dict | None, captured: tuple[str, list[int] | None] | None = None
) -> list[str]:
    lines = ["## How it was made", ""]
    if provenance:
        chain = list(provenance.get("history") or []) + [provenance]
        for step in chain:
            src, conv = step["source"], step["conversion"]
            # a Hub id in full, a local directory by its name only (the card must not leak machine paths)
            where = src.get("repo_id") or Path(src.get("path", "?")).name
            if src.get("revision"):
                where += f"@{src['revision']}"
            added = conv.get("added_tensors") or []
            quant = conv.get("quantization") or {}
            lines.append(
                f"- eaglehub {step['eaglehub_version']}: `{where}` ({src['format']}, EAGLE-{src['version']}) → "
                f"{conv['format']}, EAGLE-{conv['version']}"
                + (f"; added {', '.join(f'`{t}`' for t in added[:6])}{' …' if len(added) > 6 else ''}" if added else "")
                + (
                    f"; quantized {quant.get('scheme')} ({len(quant.get('quantized_tensors') or [])} tensors, "
                    f"compressed-tensors {quant.get('compressed_tensors_version', '?')})"
                    if quant
                    else ""
                )
                + _calibration_words(conv)
                + _rewritten_words(conv)
                + "".join(f"; dropped {d['what']}" for d in conv.get("dropped") or [])
            )
    else:
        lines.append("- no `eaglehub.json`: published as found (not converted by eaglehub).")
    q = _quant(config)
    if q:
        ignore = ", ".join(f"`{i}`" for i in q.get("ignore") or []) or "none"
        lines.append(f"- quantized: `{q.get('quant_method')}` format `{q.get('format')}`, kept unquantized: {ignore}.")
    aux = inspect["aux"]
    dims, flags, vocab = inspect["dims"], inspect["flags"], inspect["vocab"]
    lm_head = any(t["name"] == "lm_head.weight" for t in inspect["tensors"])
    lines += [
        "",
        "| | |",
        "|---|---|",
        f"| layout | {inspect['format']} (`{inspect['architecture']}`), EAGLE-{inspect['eagle_version']}, {inspect['dtype']} |",
        f"| attention | {_attention_words(inspect)} |",
        f"| aux-layer ids | {_aux_words(aux, captured)} |",
        f"| widths | hidden {_set(dims['H'])}, target hidden {_set(dims['Ht'])}, {dims['layers']} decoder layer(s) |",
        f"| vocabulary | draft {_set(vocab['Vd'])} of {_set(vocab['V'])}"
        + (" (`d2t` map)" if vocab.get("d2t") else "")
        + " |",
        f"| `lm_head` | {'own, stored' if lm_head else 'not stored: the target head is shared'} |",
        "| switches | " + ", ".join(f"`{k}` {str(v).lower()}" for k, v in flags.items()) + " |",
        f"| parameters | {inspect['parameters']:,} ({inspect['bytes'] / 2**20:.1f} MiB) |",
    ]
    return lines


def _attention_words(inspect: dict) -> str:
    """The decoder layers' attention as vLLM builds it: the layer kind, and each layer's sliding window."""
    kind = {
        "qwen3": "Qwen3-style, q/k RMSNorm per head (`Eagle3Qwen3ForCausalLM`, vLLM ≥ 0.24)",
        "mla": "multi-head latent attention (DeepSeek-style)",
    }.get(inspect["layer_kind"], "Llama-style")
    windows = inspect.get("attention_windows") or []
    if not any(windows):
        return f"{kind}, full causal attention"
    if len(set(windows)) == 1:
        where = "every layer" if len(windows) > 1 else "its layer"
        return f"{kind}, a sliding window of {windows[0]} positions in {where}"
    return f"{kind}, sliding windows per layer " + ", ".join(str(w) if w else "full" for w in windows)


def _profiles_words(checked: list[dict]) -> str:
    """`` for vLLM 0.33.0 on GPU (Model Runner V2) (`vllm-0.33-gpu`)``: the engine profiles the gate judged."""
    if not checked:
        return ""
    return " for " + "; ".join(f"{p['title']} (`{p['id']}`)" for p in checked)


def _serve_section(
    base_model: str | None, target_shown: str | None, repo_id: str, k: int, checked: list[dict]
) -> list[str]:
    """The ``vllm serve`` line for the first vLLM profile the gate checked, written for that release (its runner's
    environment, only what it accepts: :mod:`eaglehub.engines.release`); when only SGLang was checked, the line
    says it was not checked for vLLM.

    The line names the target by its Hub id (``base_model``) only: a local directory's name or no target at all
    is nothing a reader can serve, and a line that reads ``vllm serve 'the target'`` fails when pasted. Without
    the id the line takes ``$TARGET``, which the words above it say to set, and which stops the shell with that
    message when it is not set."""
    from eaglehub.engines.release import Release
    from eaglehub.profiles import resolve

    vllm = next((p for p in checked if resolve(p["id"]).engine == "vllm"), None)
    release = Release.of(vllm["id"]) if vllm else None
    lines = ["## Use with vLLM", ""]
    if vllm is None and checked:
        lines += [f"*Not checked for vLLM: the checks below are for {'; '.join(p['title'] for p in checked)}.*", ""]
    elif vllm is not None:
        lines += [f"For {vllm['title']}:", ""]
    if base_model:
        return lines + ["```bash", serve_command(base_model, repo_id, k, release=release), "```", ""]
    known = f" (the checks ran against `{target_shown}`, not a Hub id)" if target_shown else ""
    lines += [
        f"The target's Hugging Face Hub id is not known to this card{known}: set `TARGET` to the id or local path "
        "of the target this drafter was trained for, then run:",
        "",
    ]
    line = serve_command(_TARGET_VAR, repo_id, k, release=release)
    return lines + ["```bash", line.replace(shlex.quote(_TARGET_VAR), f'"{_TARGET_VAR}"'), "```", ""]


#: the serve line's target when the card does not know its Hub id: an unset TARGET stops the shell with this word
_TARGET_VAR = "${TARGET:?set TARGET to the Hub id or path of the target model}"


def _conversion_words(provenance: dict) -> str:
    """``"conversion"``, ``"quantization"`` or ``"conversion and quantization"``: what the
    ``eaglehub.json`` chain did to the source (a step with ``conversion.quantization`` quantized)."""
    steps = list(provenance.get("history") or []) + [provenance]
    quantized = any(step["conversion"].get("quantization") for step in steps)
    converted = any(not step["conversion"].get("quantization") for step in steps)
    return " and ".join(w for w, on in (("conversion", converted), ("quantization", quantized)) if on)


def build_card(
    *,
    repo_id: str,
    base_model: str | None,
    target_spec: str | None,
    k: int,
    inspect: dict,
    config: dict,
    provenance: dict | None,
    training: dict | None,
    validate_report: dict,
    entry: dict | None,
    report: dict | None,
    others: list[dict],
    forced: list[str],
    source_card: str | None,
) -> str:
    """The card text (YAML metadata + Markdown body) for the published drafter.

    ``entry``: the matched drafter section of the verify ``report`` (``None`` only under ``--force``);
    ``others``: the report's other drafters (e.g. the unquantized source), shown for comparison;
    ``forced``: the gate failures ``--force`` overrode; ``source_card``: the text of the checkpoint's
    own ``README.md`` or ``None`` (its body is kept under "Notes from the checkpoint", or under "Card of
    the source checkpoint", labelled as describing the source, when ``provenance`` shows the drafter
    was converted or quantized; its license and datasets are carried over).
    """
    from huggingface_hub import ModelCard, ModelCardData

    meta, source_body = {}, source_card or ""
    if source_card and source_card.startswith("---"):  # ModelCard logs a warning for a card without metadata
        parsed = ModelCard(source_card, ignore_metadata_errors=True)
        meta, source_body = parsed.data.to_dict(), parsed.text
    curve = card_curve(entry, report)
    extra: dict[str, Any] = {"eaglehub": {"acceptance_curve": curve}} if curve else {}
    data = ModelCardData(
        base_model=base_model,
        library_name="vllm",
        pipeline_tag="text-generation",
        tags=card_tags(inspect, config),
        license=meta.get("license"),
        datasets=meta.get("datasets"),
        # machine-readable for `eaglehub drafters`, which reads a card's metadata from the Hub's search
        **extra,
    )
    name = repo_id.split("/")[-1]
    # a local target directory by its name only: the card must not leak machine paths
    local = Path(target_spec).name if target_spec and Path(target_spec).is_dir() else target_spec
    target_shown = base_model or local
    lines = [f"# {name}", ""]
    if forced:  # first thing a reader sees: the figures below were not (all) checked
        lines += ["> **Published with `--force`** despite: " + "; ".join(forced), ""]
    checked = validate_report.get("profiles") or []
    lines += [
        f"An EAGLE-{inspect['eagle_version']} speculative-decoding drafter for "
        f"{f'[{base_model}](https://huggingface.co/{base_model})' if base_model else (f'`{target_shown}`' if target_shown else 'its target model')}: a small head that "
        "reads the target's hidden states and proposes draft tokens the target verifies, so the output "
        "is the target's own.",
        "",
        *_serve_section(base_model, target_shown, repo_id, k, checked),
    ]
    if entry is not None and report is not None:
        lines += verify_section(entry, report, others)
    lines += _made_section(inspect, config, provenance, _captured(inspect, validate_report, checked))
    tmpl = (training or {}).get("chat_template_sha256")
    lines += [
        "",
        f"Chat template at training: sha256 `{tmpl}` (serve with the same template: a different one lowers acceptance)."
        if tmpl
        else "Chat template at training: not recorded (no `training.json`).",
    ]
    counts = validate_report["counts"]
    codes = sorted({f["code"] for f in validate_report["findings"]})
    lines += [
        "",
        "## Checks",
        "",
        f"`eaglehub validate --deep`{' against the target' if validate_report.get('target') else ''}"
        f"{_profiles_words(checked)}: "
        f"{plural(counts['error'], 'error')}, {plural(counts['warning'], 'warning')}, {plural(counts['info'], 'note')}"
        + (f" ({', '.join(f'`{c}`' for c in codes)})" if codes else "")
        + ". Other engines and releases were not checked.",
    ]
    if source_body.strip():
        body = re.sub(r"^# .*\n", "", source_body.strip() + "\n", count=1).strip()
        body = re.sub(r"^(#+) ", r"#\1 ", body, flags=re.M)  # its headings sit below "Notes"
        if provenance:  # converted / quantized here: the card came with the source and describes it
            lines += [
                "",
                "## Card of the source checkpoint",
                "",
                f"*Before {_conversion_words(provenance)}: this is the card the source checkpoint came with; its "
                "figures (dtype, size, acceptance, …) describe that checkpoint, not this drafter (see above).*",
                "",
                body,
            ]
        else:
            lines += ["", "## Notes from the checkpoint", "", body]
    # figures quoted from reports and findings may hold local paths: the card names none
    card = ModelCard(f"---\n{data.to_yaml()}\n---\n\n" + scrub_text("\n".join(lines)) + "\n")
    return str(card)


def _captured(inspect: dict, validate_report: dict, checked: list[dict]) -> tuple[str, list[int] | None] | None:
    """``(profile title, ids)`` when the first profile the gate checked has the target capture its default
    aux layers for this drafter (the config names none it passes): the ids for the target's layer count,
    ``None`` when no target was read. ``None`` when the runner passes the config's ids."""
    from eaglehub.drafter.canonical import default_aux_ids
    from eaglehub.errors import EaglehubError
    from eaglehub.profiles import DEFAULT_PROFILE, ServedTarget, read

    profile = checked[0] if checked else {"id": DEFAULT_PROFILE, "title": DEFAULT_PROFILE}
    layers = None
    if validate_report.get("target"):
        from eaglehub.checks.context import read_target

        try:
            layers = read_target(validate_report["target"]).layers
        except EaglehubError:
            layers = None
    try:
        reading = read(inspect["path"], profile["id"], ServedTarget(num_layers=layers))
    except EaglehubError:
        return None
    if reading.aux_layer_ids is not None or reading.num_aux_hidden_states is None:
        return None
    return profile["title"], default_aux_ids(layers) if layers else None
