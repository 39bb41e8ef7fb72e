"""Findings and the rule catalogue: every check eaglehub makes has one registered :class:`Rule`.

Code scheme ``<S>-<AREA>-<WHAT>``: the first letter is the severity (``E`` error, ``W`` warning,
``I`` info) and never changes for a code. Codes are stable, so tools and CI may match on them; the
JSON Schemas ``schemas/validate-report.schema.json`` and ``schemas/verify-report.schema.json`` list
them as an enum, and ``docs/rules.md`` is rendered from :data:`RULES` (tests keep all three in step).

Each rule names the config field or tensor it concerns, a default fix hint (a finding may give a
more specific one), the source of the rule (a section of the reference notes or a vLLM module) and
the failure kinds of ``failure-kinds.md`` it covers (``F1`` … ``F26``). ``stage`` says which verb
reports it: ``validate`` (also run by ``convert`` on its source and output, and by ``verify`` as a
preflight) or ``verify`` (needs an engine run).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

SEVERITIES = {"E": "error", "W": "warning", "I": "info"}
STAGES = ("validate", "verify")


@dataclass(frozen=True)
class Rule:
    """One check: ``code``, one-line ``title``, what it ``concerns`` (config field or tensor), the
    default fix ``hint``, its ``source`` and the failure ``kinds`` it covers."""

    code: str
    title: str
    concerns: str
    hint: str
    source: str
    kinds: tuple[str, ...] = ()
    stage: str = "validate"

    @property
    def severity(self) -> str:
        return SEVERITIES[self.code[0]]

    def as_dict(self) -> dict:
        return {
            "code": self.code,
            "severity": self.severity,
            "title": self.title,
            "concerns": self.concerns,
            "hint": self.hint,
            "source": self.source,
            "failure_kinds": list(self.kinds),
            "stage": self.stage,
        }


def _r(code, title, concerns, hint, source, kinds=(), stage="validate") -> Rule:
    return Rule(code, title, concerns, hint, source, tuple(kinds.split()) if isinstance(kinds, str) else kinds, stage)


_RE = "shared/reference/"
#: The registry, in catalogue order (areas grouped).
RULES: tuple[Rule, ...] = (
    # --- input that cannot be read at all -------------------------------------------------------
    _r(
        "E-INPUT-MISSING",
        "a file the drafter needs is missing (config.json, the weights, a shard the index lists)",
        "config.json, model.safetensors / *.safetensors.index.json + shards / pytorch_model.bin",
        "pass the directory that holds config.json and the weights; download every shard the index lists",
        "formats.md §6.7",
    ),
    _r(
        "E-INPUT-CONFIG",
        "config.json is not valid JSON or not a JSON object (or eaglehub.json breaks its schema)",
        "config.json, eaglehub.json",
        "fix the JSON syntax (the message gives line and column)",
        "formats.md §5",
    ),
    _r(
        "E-INPUT-WEIGHTS",
        "a weight file cannot be read: truncated or corrupt safetensors header or data, legacy-pickle or "
        "non-state-dict .bin, a tensor stored twice, an index that disagrees with its shards",
        "weight files",
        "re-download the files, or re-export the weights as safetensors",
        "safetensors format; formats.md §6.7",
    ),
    _r(
        "E-INPUT-RAW",
        "a raw training checkpoint (TorchSpec FSDP, SpecForge training state), not an exported drafter",
        "weight files",
        "export it first (TorchSpec tools/convert_to_hf.py, `specforge export`)",
        "formats.md §5, §6.7",
    ),
    _r(
        "E-INPUT-AMBIGUOUS",
        "the layout fits several formats and nothing decides between them",
        "config.json, tensor names",
        "name the source format with --from",
        "formats.md §6",
    ),
    # --- config ---------------------------------------------------------------------------------
    _r(
        "E-CONFIG-SCHEMA",
        "config.json violates its layout's JSON Schema (missing field, wrong type or range)",
        "the field named",
        "fix the field (schemas/drafter-config-*.schema.json)",
        "formats.md §1, §5; vllm.md §2, §3",
    ),
    _r(
        "E-CONFIG-ARCH",
        "architectures/model_type is not a class vLLM builds an EAGLE-3 drafter from",
        "architectures, model_type",
        'set "architectures": ["LlamaForCausalLMEagle3"] and "model_type": "llama" (MLA: Eagle3DeepseekV2ForCausalLM, deepseek_v2)',
        "vllm.md §1, §5, §14",
        "F1 F22",
    ),
    _r(
        "W-CONFIG-ARCH",
        "research class LlamaForCausalLM: vLLM renames it, SGLang needs LlamaForCausalLMEagle3",
        "architectures",
        'set "architectures": ["LlamaForCausalLMEagle3"]',
        "formats.md §5",
    ),
    _r(
        "W-CONFIG-TIE",
        "tie_word_embeddings is true, but vLLM does not read it",
        "tie_word_embeddings",
        'set "tie_word_embeddings": false and ship lm_head.weight',
        "vllm.md §3",
    ),
    _r(
        "E-CONFIG-TIE-PRUNED",
        "tie_word_embeddings is true with a pruned vocabulary: a [Vd, H] head cannot be the [V, H] embedding",
        "tie_word_embeddings, draft_vocab_size",
        'set "tie_word_embeddings": false (the pruned lm_head is its own weight)',
        "formats.md §1, §5 (SpecForge forces it false)",
    ),
    _r(
        "E-CONFIG-HEADS",
        "attention heads do not fit: num_attention_heads not a multiple of num_key_value_heads, or hidden_size "
        "not divisible by the heads without an explicit head_dim",
        "num_attention_heads, num_key_value_heads, head_dim",
        "give the head counts and head_dim the drafter was trained with",
        "vLLM llama.py LlamaAttention",
    ),
    _r(
        "W-CONFIG-HEADDIM",
        "head_dim differs from hidden_size / num_attention_heads in a research-class config, whose loaders ignore head_dim",
        "head_dim, architectures",
        'set "architectures": ["LlamaForCausalLMEagle3"] (vLLM and SpecForge honour head_dim)',
        "formats.md §5",
    ),
    _r(
        "E-NOT-A-DRAFTER",
        "a full language model (e.g. the target) was given as the drafter",
        "config.json",
        "pass the drafter directory; give the target with --target",
        "failure-kinds.md F3",
        "F3",
    ),
    _r(
        "E-LAYOUT-EAGLE1",
        "an EAGLE-1/2 checkpoint (fc reads 2H, no hidden_norm), not EAGLE-3",
        "fc.weight",
        "train an EAGLE-3 drafter (method eagle3 needs aux hidden states)",
        "formats.md §6.4",
    ),
    _r(
        "E-LAYOUT-UNSUPPORTED",
        "a recognised layout this version does not check (e.g. Qwen3-style Eagle3Qwen3ForCausalLM)",
        "config.json",
        "export it to the vLLM-native layout (LlamaForCausalLMEagle3 + midlayer.*)",
        "vllm.md §1",
    ),
    # --- tensors --------------------------------------------------------------------------------
    _r(
        "E-TENSOR-MISSING",
        "a tensor the config implies is absent (vLLM never reports it and leaves it uninitialised)",
        "the tensor named",
        "export the tensor from the training checkpoint",
        "vllm.md §4.5; failure-kinds.md F2",
        "F2",
    ),
    _r(
        "E-TENSOR-UNEXPECTED",
        "a tensor the layout does not know (vLLM: KeyError; MLA loader: skipped silently)",
        "the tensor named",
        "rename it to the layout's name (fc, midlayer.*, norm, lm_head, d2t, t2d, fc_norm.{i}) or drop it",
        "vllm.md §4.4, §5",
        "F2",
    ),
    _r(
        "E-TENSOR-SHAPE",
        "a tensor's shape differs from the one the config implies",
        "the tensor named",
        "fix the config dimensions or re-export the tensor",
        "formats.md §1, §5",
        "F9 F10",
    ),
    _r(
        "E-TENSOR-DTYPE",
        "weight dtype differs from the config's torch_dtype or from the other weights",
        "torch_dtype, the tensors named",
        "cast the weights or fix torch_dtype; leave d2t/t2d dtypes alone",
        "failure-kinds.md F18",
        "F18",
    ),
    _r(
        "E-TENSOR-PREFIX",
        "tensor names carry a model. prefix; vLLM adds its own",
        "tensor names",
        "store un-prefixed names (fc.weight, midlayer.*, ...)",
        "vllm.md §4.2",
    ),
    _r(
        "E-TENSOR-NONFINITE",
        "--deep: a float tensor holds NaN or Inf values",
        "the tensor named",
        "re-export the weights from a healthy training checkpoint",
        "the drafter's logits would be NaN",
    ),
    _r(
        "W-TENSOR-INIT",
        "--deep: a tensor looks untrained (all-ones norm, constant, std = initializer_range, all-zero scale)",
        "the tensor named",
        "check that the converter copied the trained weight",
        "failure-kinds.md F2",
        "F2",
    ),
    _r(
        "E-LMHEAD-MISSING",
        "no lm_head.weight: engines share the target head or leave it random",
        "lm_head.weight",
        "export lm_head.weight [Vd, H] (for Vd == V and H == target hidden, the target's head can be copied)",
        "failure-kinds.md F8",
        "F8",
    ),
    _r(
        "E-EMBED-MISSING",
        "the drafter's width differs from the target's but it ships no embed_tokens",
        "embed_tokens.weight",
        "ship embed_tokens.weight [V, H] trained with the drafter",
        "vllm.md §6; failure-kinds.md F9",
        "F9",
    ),
    _r(
        "I-EMBED-SHARED",
        "the shipped embed_tokens equals the target's (vLLM shares the target's table)",
        "embed_tokens.weight",
        "the tensor can be dropped to save space",
        "vllm.md §6",
        "F9",
    ),
    _r(
        "I-EMBED-TRAINED",
        "the shipped embed_tokens differs from the target's: vLLM keeps the drafter's own",
        "embed_tokens.weight",
        "nothing to fix: the drafter trained its own table",
        "vllm.md §6",
        "F9",
    ),
    # --- vocabulary maps ------------------------------------------------------------------------
    _r(
        "E-D2T-MISSING",
        "a pruned vocabulary (Vd < V) without d2t: draft id i is sent to target id i",
        "d2t",
        "ship d2t (int64 offsets, target_id = i + d2t[i]) next to lm_head",
        "formats.md §2; failure-kinds.md F6",
        "F6",
    ),
    _r(
        "E-D2T-DTYPE",
        "d2t is not an integer tensor",
        "d2t",
        "store d2t as int64 offsets: d2t[i] = target_id[i] - i",
        "formats.md §2",
    ),
    _r(
        "E-D2T-ORDER",
        "arange(Vd) + d2t is not strictly increasing (repeated or unsorted target ids)",
        "d2t",
        "lm_head rows must be in ascending target-id order with d2t[i] = id[i] - i",
        "formats.md §2",
        "F6",
    ),
    _r(
        "E-D2T-RANGE",
        "a mapped target id is outside [0, V) (absolute ids stored as offsets?)",
        "d2t",
        "d2t holds offsets (id - i), not absolute ids; rebuild it from the sorted id list",
        "formats.md §2",
        "F6",
    ),
    _r(
        "W-D2T-ZERO",
        "an all-zero d2t with a pruned vocabulary (identity mapping)",
        "d2t",
        "rebuild d2t from the training vocabulary",
        "failure-kinds.md F6",
        "F6",
    ),
    _r(
        "W-D2T-UNPRUNED",
        "d2t shipped with Vd == V: vLLM >= 0.30 has no parameter for it",
        "d2t",
        "drop d2t and t2d when the vocabulary is not pruned",
        "vllm.md §4",
    ),
    _r(
        "W-T2D-MISSING",
        "a pruned vocabulary with d2t but no t2d (SGLang tooling needs it)",
        "t2d",
        "add t2d = bool[V] marking arange(Vd) + d2t",
        "formats.md §5",
    ),
    _r("E-T2D-DTYPE", "t2d is not bool", "t2d", "store t2d as a bool mask", "formats.md §2"),
    _r(
        "E-T2D-COUNT",
        "t2d marks a different number of ids than draft_vocab_size",
        "t2d, draft_vocab_size",
        "rebuild t2d from d2t (t2d[arange(Vd) + d2t] = True)",
        "failure-kinds.md F7",
        "F7",
    ),
    _r(
        "E-T2D-MISMATCH",
        "t2d and d2t name different target ids (vLLM uses d2t, SGLang tooling t2d)",
        "t2d, d2t",
        "rebuild both maps from one sorted id list",
        "failure-kinds.md F7",
        "F7",
    ),
    _r(
        "E-VOCAB-DRAFT",
        "draft_vocab_size > vocab_size",
        "draft_vocab_size",
        "draft_vocab_size counts a subset of the target vocabulary",
        "formats.md §2",
    ),
    _r(
        "E-VOCAB-MISMATCH",
        "the drafter's vocab_size differs from the target's",
        "vocab_size",
        "vocab_size must be the target's; draft_vocab_size is the pruned size",
        "vllm.md §14",
    ),
    # --- norms and EAGLE-3.1 flags --------------------------------------------------------------
    _r(
        "E-FCNORM-MISSING",
        "fc_norm is true but fc_norm.{i}.weight is absent; vLLM runs silently with unit norms",
        "fc_norm.{i}.weight",
        "ship the trained fc_norm.{i}.weight [Ht] (or `eaglehub convert --to 3.1` for unit gains)",
        "vllm.md §11",
        "F2 F17",
    ),
    _r(
        "W-FCNORM-UNUSED",
        "fc_norm.{i}.weight present but fc_norm is not true: the weights are ignored",
        "fc_norm, fc_norm.{i}.weight",
        'set "fc_norm": true at the top level if the drafter was trained with it',
        "formats.md §6.5",
        "F17",
    ),
    _r(
        "W-FCNORM-UNIT",
        "every fc_norm gain is exactly one: an uncalibrated 3 → 3.1 upgrade, not numerically the 3.0 drafter",
        "fc_norm.{i}.weight",
        "calibrate the fc_norm gains (or fine-tune the upgraded drafter) and re-measure with `eaglehub verify`",
        "formats.md §7 (upgrade step 4); README 'What make demo measured'",
        "F17",
    ),
    _r(
        "W-FCNORM-ALIAS",
        "the SGLang alias use_aux_norm is set but fc_norm, which vLLM reads, is not",
        "use_aux_norm, fc_norm",
        'add "fc_norm": true',
        "formats.md §4",
        "F17",
    ),
    _r(
        "E-FLAG-MISPLACED",
        "an EAGLE switch (fc_norm, norm_output, norm_before_residual, target_hidden_size, ...) is set only in a "
        "sub-config that vLLM does not read for it",
        "the key named",
        "write the key at the top level of config.json, where vLLM reads it",
        "vllm.md §2, §3; failure-kinds.md F16, F17",
        "F16 F17",
    ),
    _r(
        "W-NORMS-BOTH",
        "norm_before_fc and fc_norm are both on: vLLM applies input_norm then fc_norm, speculators forbids the pair",
        "norm_before_fc, fc_norm",
        "keep the norm the drafter was trained with",
        "formats.md §4",
        "F16",
    ),
    _r(
        "E-INPUTNORM-MISSING",
        "norm_before_fc is set but input_norm.weight [A*Ht] is absent",
        "input_norm.weight",
        "ship the trained input_norm.weight, or clear norm_before_fc",
        "failure-kinds.md F16",
        "F16",
    ),
    _r(
        "E-INPUTNORM-UNUSED",
        "input_norm.weight present but norm_before_fc unset: vLLM skips the weight",
        "input_norm.weight, norm_before_fc",
        'set "norm_before_fc": true at the top level',
        "vllm.md §4.3; failure-kinds.md F16",
        "F16",
    ),
    _r(
        "W-INPUTNORM-NESTED",
        "norm_before_fc is set only inside eagle_config: engines that read the top level skip input_norm",
        "eagle_config.norm_before_fc",
        'write "norm_before_fc": true at the top level too (vLLM reads the nested one first)',
        "vllm.md §3; failure-kinds.md F16",
        "F16",
    ),
    _r(
        "W-SLIDING-WINDOW",
        "the drafter declares a sliding attention window: engines ignore it or take the target's setting",
        "sliding_window, layer_types, use_sliding_window",
        "check acceptance with `eaglehub verify`; train with full attention to be safe",
        "failure-kinds.md F15",
        "F15",
    ),
    # --- aux hidden states ----------------------------------------------------------------------
    _r(
        "E-AUX-DUPLICATE",
        "a repeated aux-layer id (vLLM defaults included): fewer states captured than fc expects",
        "eagle_aux_hidden_state_layer_ids",
        "write distinct, sorted C-in ids at the top level",
        "vllm.md §7, §11",
        "F11",
    ),
    _r(
        "E-AUX-ORDER",
        "aux-layer ids are not sorted ascending (vLLM concatenates in ascending layer order)",
        "eagle_aux_hidden_state_layer_ids",
        "write the sorted list (and make sure fc blocks follow that order)",
        "formats.md §3",
        "F11",
    ),
    _r(
        "E-AUX-RANGE",
        "an aux-layer id is outside [0, N] of the target",
        "eagle_aux_hidden_state_layer_ids",
        "pick ids inside the target's layers, or pair the drafter with the target it was trained on",
        "vllm.md §7",
        "F11",
    ),
    _r(
        "E-AUX-COUNT",
        "the aux-layer count, num_aux_hidden_states and the fc width disagree",
        "eagle_aux_hidden_state_layer_ids, fc.weight",
        "make num_aux_hidden_states, the id list and the fc width agree",
        "formats.md §3",
        "F11",
    ),
    _r(
        "W-AUX-CONVENTION",
        "aux ids look like the other convention (C-in vs C-out, off by one)",
        "eagle_aux_hidden_state_layer_ids",
        "write the C-in list at the top level (`eaglehub convert --format vllm`)",
        "formats.md §3",
        "F11",
    ),
    _r(
        "W-AUX-LAST",
        "aux id N (the final pre-norm state): Llama/Qwen targets capture ids < N",
        "eagle_aux_hidden_state_layer_ids",
        "check the engine captures it; otherwise use an id below N",
        "vllm.md §7",
        "F11",
    ),
    _r(
        "W-AUX-CONFLICT",
        "top-level and eagle_config id lists name different layers: vLLM reads one, SGLang the other",
        "eagle_aux_hidden_state_layer_ids",
        "keep one list, the one the drafter was trained with",
        "formats.md §3",
        "F11",
    ),
    _r(
        "W-AUX-NONDEFAULT",
        "the drafter's aux ids differ from the target's defaults: engines that capture only the defaults feed it "
        "the wrong states",
        "eagle_aux_hidden_state_layer_ids",
        "serve with an engine that reads the drafter's ids (vLLM does); state the ids on the model card",
        "failure-kinds.md F12",
        "F12",
    ),
    _r(
        "I-AUX-DEFAULT",
        "no explicit aux-layer ids: vLLM uses the target's (2, N//2, N-3)",
        "eagle_aux_hidden_state_layer_ids",
        "write the ids explicitly",
        "vllm.md §7",
        "F11",
    ),
    _r(
        "E-HIDDEN-MISMATCH",
        "target_hidden_size (or hidden_size) differs from the target's hidden_size",
        "target_hidden_size",
        "pair the drafter with the target it was trained on, or fix target_hidden_size",
        "vllm.md §14",
        "F10",
    ),
    _r(
        "E-HIDDEN-UNDECLARED",
        "no target_hidden_size but the fc width implies Ht != H",
        "target_hidden_size",
        'add "target_hidden_size" = fc.in / A',
        "failure-kinds.md F10",
        "F10",
    ),
    # --- dtype, RoPE, context -------------------------------------------------------------------
    _r(
        "W-DTYPE-MISMATCH",
        "the drafter's dtype differs from the target's (both meet in one op)",
        "torch_dtype",
        "serve both in one dtype (vLLM casts the drafter to the model dtype)",
        "failure-kinds.md F18",
        "F18",
    ),
    _r(
        "E-ROPE-TYPE",
        "an unknown rope_type",
        "rope_scaling.rope_type, rope_parameters.rope_type",
        "copy the RoPE fields verbatim from the training config",
        "failure-kinds.md F14",
        "F14",
    ),
    _r(
        "E-ROPE-PARAMS",
        "a RoPE scaling block lacks a parameter its rope_type needs, or has one out of range",
        "rope_scaling, rope_parameters",
        "copy the RoPE fields verbatim from the training config",
        "transformers modeling_rope_utils; F14",
        "F14",
    ),
    _r(
        "W-ROPE-MISMATCH",
        "RoPE settings (theta, scaling) differ from the target's",
        "rope_theta, rope_scaling, rope_parameters",
        "keep RoPE fields as trained; if a converter dropped them, copy them from the training config",
        "failure-kinds.md F14",
        "F14",
    ),
    _r(
        "W-CONTEXT-SHORT",
        "the drafter was configured or trained for fewer positions than the target serves: acceptance falls on "
        "longer prompts",
        "max_position_embeddings, training.json max_seq_len",
        "measure acceptance on long prompts; train on longer sequences if it collapses",
        "failure-kinds.md F13; vLLM speculative.py (#48894)",
        "F13",
    ),
    # --- target pairing -------------------------------------------------------------------------
    _r(
        "E-TARGET-CONFIG",
        "the target's config.json cannot be read; the target checks were skipped",
        "target config.json",
        "point --target at a Hugging Face model directory (or cached repo id) with a valid config.json",
        "vllm.md §7",
    ),
    _r(
        "E-TARGET-NO-EAGLE3",
        "the target's architecture is known to vLLM but does not emit aux hidden states (no SupportsEagle3)",
        "target architectures",
        "pick a target architecture that implements SupportsEagle3, or a newer vLLM",
        "vllm.md §7, §8; vLLM model_executor/models (generated table)",
        "F4",
    ),
    _r(
        "W-TARGET-UNKNOWN-ARCH",
        "the target's architecture is not in vLLM's model registry (as of the table's vLLM version)",
        "target architectures",
        "check that the vLLM you serve with registers the target and implements SupportsEagle3 for it",
        "vllm.md §8",
        "F4",
    ),
    _r(
        "W-TARGET-FAMILY",
        "attention families differ: an MHA (Llama) drafter for an MLA target, or an MLA drafter for an MHA target",
        "architectures, kv_lora_rank",
        'pin the draft attention backend in the speculative config ("attention_backend"), and verify',
        "failure-kinds.md F22; vllm.md §5",
        "F22",
    ),
    _r(
        "W-TOKENS-SPECIAL",
        "special-token ids (bos, eos, pad) in the drafter's config differ from the target's",
        "bos_token_id, eos_token_id, pad_token_id",
        "copy the target's special-token ids (a converter rewrote them?)",
        "formats.md §8 (speculators convert rewrote 128000/128001 to 1/2)",
    ),
    _r(
        "E-TOKENIZER-SIZE",
        "the target's tokenizer holds more tokens than vocab_size: ids past the embedding table",
        "vocab_size, tokenizer.json",
        "pair the drafter with the tokenizer it was trained with",
        "vllm.md §14",
    ),
    _r(
        "W-TOKENIZER-MISMATCH",
        "the drafter ships a tokenizer that differs from the target's",
        "tokenizer.json",
        "ship the target's tokenizer files, or none",
        "failure-kinds.md F25",
        "F25",
    ),
    _r(
        "W-TEMPLATE-CHANGED",
        "the target's chat template is not the one the drafter's training data was rendered with",
        "chat_template.jinja / tokenizer_config.json chat_template (target), training.json or eaglehub.json chat_template_sha256",
        "retrain on data rendered with the current template, or serve the old one",
        "failure-kinds.md F25",
        "F25",
    ),
    _r(
        "I-QUANT-PAIRING",
        "a quantized target with an unquantized drafter: vLLM before PR #25883 gave the drafter the target's quant config",
        "target quantization_config, hf_quant_config.json",
        "the vLLM versions this tool targets (>= 0.22) have the fix; verify the pair on older ones",
        "failure-kinds.md F19",
        "F19",
    ),
    # --- quantized drafters ---------------------------------------------------------------------
    _r(
        "E-QUANT-CONFIG",
        "quantization_config is malformed, names a method vLLM does not load for drafters, or uses blocks that do not "
        "divide a fused layer's rows or, at --tp N, a partition (vLLM refuses the layer)",
        "quantization_config",
        "write the compressed-tensors block of quantize-publish.md §2; use blocks that divide every fused layer's rows and every "
        "TP partition (eaglehub quantize --scheme fp8-block keeps such layers unquantized)",
        "quantize-publish.md §2, §5 and its CPU notes; vLLM fp8_utils.py validate_fp8_block_shape",
        "F20",
    ),
    _r(
        "E-QUANT-IGNORE",
        "an ignore entry is a bare name (vLLM matches prefixed names: it never matches), or a stored lm_head / "
        "embed_tokens that a config target matches is not ignored",
        "quantization_config.ignore",
        'use anchored regexes: "re:.*lm_head$", "re:.*embed_tokens$", "re:.*fc$"',
        "quantize-publish.md §3",
        "F20",
    ),
    _r(
        "E-QUANT-SCALE",
        "a quantized weight lacks a quantization parameter (weight_scale, input_scale for static activations, "
        "W4A16 weight_shape / weight_zero_point) or has one of the wrong shape",
        "<layer>.weight_scale, input_scale, weight_shape",
        "re-quantize: every quantized weight needs its scales",
        "quantize-publish.md §2",
        "F20",
    ),
    _r(
        "E-QUANT-MISMATCH",
        "tensors and quantization_config disagree: quantized weights without a config, a layer quantized that the "
        "config ignores, or one left unquantized that vLLM will build quantized",
        "quantization_config, the tensors named",
        "re-quantize with one config for the whole drafter",
        "quantize-publish.md §2, §3, §5",
        "F20",
    ),
    _r(
        "E-QUANT-UNSUPPORTED",
        "lm_head, embed_tokens, a norm or a vocabulary map is quantized: vLLM builds them unquantized",
        "the tensors named",
        "keep lm_head, embed_tokens, norms, d2t and t2d in the original dtype",
        "quantize-publish.md §1, §5",
        "F20",
    ),
    # --- engine version and parallelism ---------------------------------------------------------
    _r(
        "E-ENGINE-VERSION",
        "the drafter needs a newer vLLM than the one it will be served with (--vllm-version or the installed one)",
        "vLLM version",
        "serve with the vLLM version named in the message, or convert to a layout the older version reads",
        "vllm.md §12",
        "F4 F17 F22",
    ),
    _r(
        "W-ENGINE-VERSION",
        "no vLLM version is known: the drafter needs at least the version named",
        "vLLM version",
        "pass --vllm-version X.Y, or install the vLLM you serve with",
        "vllm.md §12",
        "F4 F17 F22",
    ),
    _r(
        "E-TP-DIVISIBILITY",
        "a dimension does not divide by the tensor-parallel size the drafter is built with (vLLM builds the "
        "drafter with the target's TP)",
        "num_attention_heads, num_key_value_heads, intermediate_size",
        "serve with a TP size that divides the heads and intermediate_size",
        "failure-kinds.md F21; vLLM linear.py",
        "F21",
    ),
    # --- MLA ------------------------------------------------------------------------------------
    _r(
        "E-MLA-MODELTYPE",
        "MLA drafter with model_type deepseek_v3/deepseek_v32/glm_moe_dsa/deepseek_v4: vLLM makes it an MTP model",
        "model_type",
        'set "model_type": "deepseek_v2" (or "kimi_k2" for a Kimi-K2 target)',
        "vllm.md §5",
        "F22",
    ),
    _r(
        "E-MLA-QLORA",
        "MLA drafter with q_lora_rank null or absent: vLLM's loader always fuses q_a_proj",
        "q_lora_rank",
        "set q_lora_rank to the rows of q_a_proj (or export with a query LoRA)",
        "vllm.md §5 (MLA on CPU)",
        "F22",
    ),
    _r(
        "E-MLA-NORMBEFOREFC",
        "norm_before_fc or input_norm.weight on an MLA drafter: deepseek_eagle3.py has no pre-FC norm",
        "norm_before_fc, input_norm.weight",
        "an MLA drafter cannot use a pre-FC norm; retrain without it",
        "vllm.md §5",
        "F22",
    ),
    # --- verify (engine runs) -------------------------------------------------------------------
    _r(
        "E-VERIFY-LOSSLESS",
        "greedy output with the drafter differs from the target alone",
        "outputs",
        "check the pairing and the engine version, then the target's top-1/top-2 margin at the divergence",
        "failure-kinds.md F23",
        "F23",
        "verify",
    ),
    _r(
        "E-VERIFY-NOT-WIRED",
        "position-0 acceptance is ~0: the drafter's proposals do not reach the target",
        "acceptance",
        "check d2t, aux-layer ids, weight names and the 3.1 flags (`eaglehub validate --target`)",
        "failure-kinds.md Cross-cutting (F2, F5, F6, F8, F12, F17)",
        "F2 F5 F6 F8 F12 F17",
        "verify",
    ),
    _r(
        "E-VERIFY-COUNTERS",
        "the engine's spec-decode counters break their invariants",
        "engine counters",
        "report an engine bug",
        "vllm.md §9",
        (),
        "verify",
    ),
    _r(
        "E-VERIFY-AL-REGRESSION",
        "acceptance length fell below a reference report's by more than the tolerance",
        "acceptance_length",
        "compare the engine versions the two reports name; pin the version that met the reference",
        "failure-kinds.md F26",
        "F26",
        "verify",
    ),
    _r(
        "W-VERIFY-LOW-AL",
        "acceptance length below 1.3: speculation is likely slower than plain decoding",
        "acceptance_length",
        "compare the drafter's training data and length with these prompts (long prompts: F13); a 3.1 upgrade with unit "
        "fc_norm gains (validate: W-FCNORM-UNIT) needs eaglehub convert --to 3.1 --calibrate",
        "failure-kinds.md F13",
        "F13",
        "verify",
    ),
    _r(
        "E-SAMPLING-BIASED",
        "speculative sampling does not reproduce the target's distribution (goodness-of-fit test fails)",
        "acceptance rule, residual distribution",
        "accept with min(1, p/q) for the q actually sampled; resample from norm(max(0, p - q))",
        "Leviathan et al. 2023, Chen et al. 2023; failure-kinds.md F24",
        "F24",
        "verify",
    ),
    _r(
        "W-VERIFY-NEAR-TIE",
        "greedy outputs diverge only at numerical near-ties of the target (top-2 logits within epsilon)",
        "outputs",
        "none needed: a (k+1)-token verify pass reduces in another order than 1-token decoding; compare in float32 "
        "to confirm",
        "benchmarks.md §4 pitfall 1; failure-kinds.md F23",
        "F23",
        "verify",
    ),
    _r(
        "E-VERIFY-ENGINES-DISAGREE",
        "two engines give acceptance lengths for the same pair and prompts that differ by more than the tolerance",
        "acceptance_length, engines",
        "one engine drafts differently: compare the drafter's flags (fc_norm, "
        "norm_output, norm_before_residual) and aux ids with what each engine reads, and the engine versions",
        "vllm.md §3; drafter-training.md (a PyTorch re-implementation predicted vLLM's AL within 0.02)",
        (),
        "verify",
    ),
)

RULES_BY_CODE: dict[str, Rule] = {r.code: r for r in RULES}
#: code -> title (kept for callers that only need the one-liners)
CODES: dict[str, str] = {r.code: r.title for r in RULES}


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


def finding(code: str, subject: str, message: str, hint: str | None = None) -> Finding:
    """Build a finding; the severity follows from the code's first letter, the hint defaults to the rule's.
    Subject, message and hint go through :func:`printable` (they may quote untrusted config values).

    Raises:
        KeyError: ``code`` is not in the registry (a programming error, caught by the tests).
    """
    rule = RULES_BY_CODE.get(code)
    if rule is None:
        raise KeyError(f"unregistered finding code {code}")
    return Finding(
        code=code,
        severity=rule.severity,
        subject=printable(subject),
        message=printable(message),
        hint=printable(rule.hint if hint is None else hint),
    )


def printable(text) -> str:
    """``text`` with every non-printable character (newlines, terminal escapes, lone surrogates) written
    as its backslash escape: findings and tables quote config values and tensor names, which are
    untrusted, and must stay one line that no terminal interprets."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(text))


def count_by_severity(findings: list[Finding]) -> dict[str, int]:
    """``{"error": n, "warning": n, "info": n}``."""
    counts = dict.fromkeys(SEVERITIES.values(), 0)
    for f in findings:
        counts[f.severity] += 1
    return counts


def rule_catalogue(stage: str | None = None) -> list[dict]:
    """Every rule (or those of one ``stage``) as JSON-ready dicts (``validate --list-rules``,
    ``schemas/rules.schema.json``), in registry order."""
    return [r.as_dict() for r in RULES if stage is None or r.stage == stage]


def rules_markdown() -> str:
    """``docs/rules.md``: the catalogue as Markdown tables, one per stage (a test keeps the file in step)."""
    lines = [
        "# eaglehub rule catalogue",
        "",
        "Generated from `eaglehub/findings.py` (`eaglehub validate --list-rules --markdown`); do not edit by hand.",
        "Severity is the code's first letter: E error (exit 1), W warning (exit 1 with `--strict`), I info.",
        "Failure kinds refer to the entries F1–F26 of the project's failure-kinds reference.",
        "Sources: `formats.md`, `vllm.md`, `quantize-publish.md` and `failure-kinds.md` are the project's reference notes",
        "(kept in `shared/reference/` beside this repository), which cite the upstream code and public reports; vLLM module",
        "paths are those of vLLM 0.32.0 unless a version is named, and `#NNNN` are pull requests or issues of the project named.",
        "",
    ]
    for stage in STAGES:
        rules = [r for r in RULES if r.stage == stage]
        lines += [
            f"## `eaglehub {stage}` ({len(rules)} rules)",
            "",
            "| code | severity | title | concerns | fix hint | source | kinds |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in rules:
            cells = (f"`{r.code}`", r.severity, r.title, r.concerns, r.hint, r.source, " ".join(r.kinds))
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        lines.append("")
    return "\n".join(lines)
