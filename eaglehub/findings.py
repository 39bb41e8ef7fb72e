"""Findings: one problem (or note) about a drafter, with a stable code, a severity and a fix hint.

Code scheme: ``<S>-<AREA>-<WHAT>``; the first letter is the severity (``E`` error, ``W`` warning,
``I`` info) and never changes for a code. Codes are stable: tools and CI may match on them; the
JSON Schema ``schemas/validate-report.schema.json`` lists them as an enum (a test keeps both in step).

| code | severity | meaning (source) |
|---|---|---|
| E-CONFIG-SCHEMA | error | config.json violates ``schemas/drafter-config.schema.json`` |
| E-CONFIG-ARCH | error | ``architectures``/``model_type`` is not a class vLLM builds a drafter from (F1, vllm.md §1) |
| W-CONFIG-ARCH | warning | research class ``LlamaForCausalLM``: SGLang needs ``LlamaForCausalLMEagle3`` (formats.md §5) |
| W-CONFIG-TIE | warning | ``tie_word_embeddings: true`` is not read by vLLM (vllm.md §3) |
| E-NOT-A-DRAFTER | error | a full language model (e.g. the target) was given as drafter (F3) |
| E-LAYOUT-EAGLE1 | error | EAGLE-1/2 checkpoint (``fc [H,2H]``, no ``hidden_norm``), not EAGLE-3 (formats.md §6.4) |
| E-LAYOUT-UNSUPPORTED | error | detected layout (e.g. Qwen3-style ``Eagle3Qwen3ForCausalLM``) is not checked by this version |
| E-TENSOR-MISSING | error | a tensor the config implies is absent (F2; vLLM never reports it, vllm.md §4.5) |
| E-TENSOR-UNEXPECTED | error | a tensor the layout does not know (vLLM: KeyError, vllm.md §4.4) |
| E-TENSOR-SHAPE | error | shape differs from the one the config implies (formats.md §1) |
| E-TENSOR-DTYPE | error | weight dtype differs from the config's ``torch_dtype`` or from the other weights (F18) |
| E-TENSOR-PREFIX | error | names carry a ``model.`` prefix; vLLM adds its own (vllm.md §4.2) |
| E-TENSOR-NONFINITE | error | ``--deep``: a float tensor holds NaN or Inf values (the drafter's logits would be NaN) |
| W-TENSOR-INIT | warning | a tensor looks freshly initialised (all ones / zeros, std = ``initializer_range``) (F2) |
| E-LMHEAD-MISSING | error | no ``lm_head.weight`` (F8) |
| E-EMBED-MISSING | error | ``H != Ht`` but no ``embed_tokens.weight [V, H]`` (F9) |
| I-EMBED-SHARED | info | shipped ``embed_tokens`` equals the target's (vllm.md §6) |
| I-EMBED-TRAINED | info | shipped ``embed_tokens`` differs from the target's: vLLM keeps the drafter's (vllm.md §6) |
| E-D2T-MISSING | error | pruned vocabulary (``Vd < V``) without ``d2t`` (F6) |
| E-D2T-DTYPE | error | ``d2t`` is not an integer tensor (formats.md §2) |
| E-D2T-ORDER | error | ``arange(Vd) + d2t`` is not strictly increasing (formats.md §2) |
| E-D2T-RANGE | error | a mapped id is outside ``[0, V)`` (absolute ids stored as offsets) (formats.md §2) |
| W-D2T-ZERO | warning | all-zero ``d2t`` with a pruned vocabulary (identity mapping; F6) |
| W-D2T-UNPRUNED | warning | ``d2t`` shipped with ``Vd == V``: vLLM >= 0.30 has no parameter for it (vllm.md §4) |
| W-T2D-MISSING | warning | pruned vocabulary with ``d2t`` but no ``t2d`` (SGLang tooling needs it; formats.md §5) |
| E-T2D-DTYPE | error | ``t2d`` is not bool (formats.md §2) |
| E-T2D-COUNT | error | ``t2d.sum() != Vd`` (F7) |
| E-T2D-MISMATCH | error | ``t2d`` and ``d2t`` name different target ids (F7) |
| E-VOCAB-DRAFT | error | ``draft_vocab_size > vocab_size`` |
| E-VOCAB-MISMATCH | error | drafter ``vocab_size`` differs from the target's |
| E-FCNORM-MISSING | error | ``fc_norm: true`` but ``fc_norm.{i}.weight`` absent; vLLM runs silently with unit norms (vllm.md §11) |
| W-FCNORM-UNUSED | warning | ``fc_norm.{i}.weight`` present but ``fc_norm`` is not true: weights ignored (formats.md §6.5) |
| W-FCNORM-ALIAS | warning | SGLang alias ``use_aux_norm`` set but ``fc_norm`` (read by vLLM) is not (formats.md §4) |
| E-INPUTNORM-MISSING | error | ``norm_before_fc`` set but no ``input_norm.weight [A*Ht]`` (F16) |
| E-INPUTNORM-UNUSED | error | ``input_norm.weight`` present but ``norm_before_fc`` unset: vLLM skips it (F16, vllm.md §4.3) |
| E-AUX-DUPLICATE | error | repeated aux-layer id, vLLM defaults included (F11, vllm.md §11) |
| E-AUX-ORDER | error | aux-layer ids not sorted ascending (formats.md §3) |
| E-AUX-RANGE | error | aux-layer id outside ``[0, N]`` of the target (F11) |
| E-AUX-COUNT | error | aux-layer count, ``num_aux_hidden_states`` and ``fc`` width disagree (formats.md §3) |
| W-AUX-CONVENTION | warning | ids look like the other convention (C-in vs C-out, off by one; F11) |
| W-AUX-LAST | warning | id ``N`` (final pre-norm state): Llama/Qwen targets capture ids ``< N`` (vllm.md §7) |
| W-AUX-CONFLICT | warning | top-level and ``eagle_config`` id lists name different layers: vLLM reads one, SGLang the other (formats.md §3) |
| I-AUX-DEFAULT | info | no explicit aux-layer ids: vLLM uses the target's ``(2, N//2, N-3)`` (vllm.md §7) |
| E-HIDDEN-MISMATCH | error | ``target_hidden_size`` (or ``H``) differs from the target's ``hidden_size`` |
| E-HIDDEN-UNDECLARED | error | no ``target_hidden_size`` but ``fc`` width implies ``Ht != H`` (F10) |
| W-DTYPE-MISMATCH | warning | drafter dtype differs from the target's (F18) |
| E-ROPE-TYPE | error | unknown ``rope_type`` (F14) |
| W-ROPE-MISMATCH | warning | RoPE settings differ from the target's (F14) |
| E-MLA-MODELTYPE | error | MLA drafter with ``model_type`` ``deepseek_v3``/``deepseek_v32``/``glm_moe_dsa``/``deepseek_v4``: vLLM rewrites it into an MTP model (vllm.md §5) |
| E-MLA-QLORA | error | MLA drafter with ``q_lora_rank`` null or absent: vLLM's loader always fuses ``q_a_proj`` (vllm.md §5, MLA on CPU) |
| E-MLA-NORMBEFOREFC | error | ``norm_before_fc`` or ``input_norm.weight`` on an MLA drafter: ``deepseek_eagle3.py`` has no pre-FC norm (vllm.md §5) |
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

SEVERITIES = {"E": "error", "W": "warning", "I": "info"}

_TABLE_ROW = re.compile(r"^\| ([EWI]-[A-Z0-9-]+) \| (error|warning|info) \| (.+) \|$", re.M)

#: code -> one-line meaning, parsed from the table above so the documentation is the registry.
CODES: dict[str, str] = {m.group(1): m.group(3) for m in _TABLE_ROW.finditer(__doc__ or "")}


@dataclass(frozen=True)
class Finding:
    """One finding. ``subject`` names the config field (dotted path) or tensor it concerns."""

    code: str
    severity: str
    subject: str
    message: str
    hint: str

    def as_dict(self) -> dict:
        return asdict(self)


def finding(code: str, subject: str, message: str, hint: str = "") -> Finding:
    """Build a finding; the severity follows from the code's first letter.

    Raises:
        KeyError: ``code`` is not in the registry (a programming error, caught by the tests).
    """
    if code not in CODES:
        raise KeyError(f"unregistered finding code {code}")
    return Finding(code=code, severity=SEVERITIES[code[0]], subject=subject, message=message, hint=hint)


def count_by_severity(findings: list[Finding]) -> dict[str, int]:
    """``{"error": n, "warning": n, "info": n}``."""
    counts = {s: 0 for s in SEVERITIES.values()}
    for f in findings:
        counts[f.severity] += 1
    return counts


def rule_catalogue() -> list[dict]:
    """Every rule: ``{"code", "severity", "title"}`` in registry order (``validate --list-rules``,
    ``schemas/rules.schema.json``)."""
    return [{"code": c, "severity": SEVERITIES[c[0]], "title": t} for c, t in CODES.items()]
