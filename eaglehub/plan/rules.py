"""The parallel layouts vLLM 0.33 accepts for a target served with an EAGLE-3 drafter, and the layouts a
target's publisher documents. Each rule is vLLM 0.33.0's own check, cited by file and line:

- tensor parallelism divides the attention heads (``config/model.py`` L1557-1564);
- pipeline parallelism needs a target whose decoder relays the EAGLE-3 aux hidden states from one stage
  to the next: Model Runner V2 (the CUDA default) calls ``verify_supports_aux_hidden_states_over_pp`` when
  PP > 1 (``v1/worker/gpu/model_runner.py`` L412-416, ``v1/worker/gpu/spec_decode/eagle/eagle3_utils.py``
  L44-45, L57-63), which refuses a decoder without ``supports_aux_hidden_states_over_pp`` (default False,
  ``model_executor/models/interfaces.py`` L1611). V1 has no relay, so no PP is planned for it either;
- expert parallelism needs a MoE target (``config/model.py`` L1566-1567, L1498-1503);
- data parallelism with ``LLM(...)`` (offline, what ``eaglehub verify`` runs) is refused for dense targets
  (``config/parallel.py`` L1030-1034), so the verify run has none. ``vllm serve --data-parallel-size N``
  takes it for any target: a MoE target's ranks run in step (``DPEngineCoreProc``), a dense target's run as
  independent engines behind one API server (``v1/engine/core.py`` L1546-1554, "Non-MoE DP ranks are
  completely independent"; the coordinator balances load, ``v1/engine/utils.py`` L1265-1269). Nothing there
  refuses EAGLE-3. Either way ``VllmConfig`` sees DP > 1 before the ranks split (``config/vllm.py`` L1862)
  and switches the per-batch-size k schedule off (``num_speculative_tokens_per_batch_size``; fixed k for
  every batch: L1110-1124);
- workers on other nodes: the Ray executor (``--distributed-executor-backend ray``) or Ray data-parallel
  ranks (``--data-parallel-backend ray``, ``v1/engine/utils.py`` L1301); ``mp`` with more ranks than the
  node's GPUs and no ``--nnodes`` is refused (``config/parallel.py`` L1066-1075), and ``--nnodes`` with
  Ray is refused (L1104-1112), so a plan's multi-node line is Ray's and never sets ``--nnodes``;
- the drafter runs at the target's TP unless told otherwise (``config/speculative.py`` L1856-1860).
"""

from __future__ import annotations

from dataclasses import dataclass

from eaglehub.plan.memory import n_experts

VLLM_VERSION = "0.33.0"

RELAY_DECODERS = {
    # architecture -> (the decoder class its model holds, where vLLM 0.33.0 sets the flag or inherits it)
    **dict.fromkeys(
        (
            "LlamaForCausalLM",
            "LLaMAForCausalLM",
            "InternLM3ForCausalLM",
            "IQuestCoderForCausalLM",
            "TeleChat3ForCausalLM",
        ),
        ("LlamaModel", "model_executor/models/llama.py L358"),
    ),
    "MistralForCausalLM": ("MistralModel", "model_executor/models/mistral.py L207 (a LlamaModel)"),
    "Ministral3ForCausalLM": ("MistralModel", "model_executor/models/mistral.py L207 (a LlamaModel)"),
    "Llama4ForCausalLM": ("Llama4Model", "model_executor/models/llama4.py L384 (a LlamaModel)"),
    "Glm4ForCausalLM": ("Glm4Model", "model_executor/models/glm4.py L225 (a LlamaModel)"),
    "Qwen2ForCausalLM": ("Qwen2Model", "model_executor/models/qwen2.py L335"),
    "Qwen3ForCausalLM": ("Qwen3Model", "model_executor/models/qwen3.py L269 (a Qwen2Model)"),
    "SarvamMLAForCausalLM": ("SarvamMLAModel", "model_executor/models/sarvam.py L466"),
    "DeepseekV4ForCausalLM": ("DeepseekV4Model", "models/deepseek_v4/nvidia/model.py L812"),
    "MiniMaxM3SparseForCausalLM": ("MiniMaxM3Model", "models/minimax_m3/nvidia/model.py L803"),
    "KimiK3ForConditionalGeneration": ("KimiLinearModel", "models/kimi_k3/nvidia/model.py L943"),
}
"""Targets whose decoder relays aux hidden states over pipeline stages in vLLM 0.33.0. Not there, among
others: DeepSeek-V3 / Kimi-K2 (``DeepseekV2Model``, ``model_executor/models/deepseek_v2.py`` L1427, no flag;
Kimi-K2.5/K2.6's ``KimiK25ForConditionalGeneration`` wraps it), Qwen3-MoE (``Qwen3MoeModel``) and MiMo
(``model_executor/models/mimo.py`` L58 sets it False); an architecture not listed gets no PP."""

PP_ALONE = {
    # architecture -> where vLLM 0.33.0's model class implements SupportsPP (config/model.py L1570-1576
    # refuses PP for the others): a target served alone, where no EAGLE-3 relay is needed
    **{arch: f"{where[1]} (a relaying decoder)" for arch, where in RELAY_DECODERS.items()},
    "DeepseekV2ForCausalLM": "model_executor/models/deepseek_v2.py L1872-1874",
    "DeepseekV3ForCausalLM": "model_executor/models/deepseek_v2.py L2005 (a DeepseekV2ForCausalLM)",
    "KimiK25ForConditionalGeneration": "model_executor/models/kimi_k25.py L291-294",
    "Qwen2MoeForCausalLM": "model_executor/models/qwen2_moe.py L423",
    "Qwen3MoeForCausalLM": "model_executor/models/qwen3_moe.py L543",
    "MixtralForCausalLM": "model_executor/models/mixtral.py L375",
    "GptOssForCausalLM": "model_executor/models/gpt_oss.py L1369",
    "Gemma3ForCausalLM": "model_executor/models/gemma3.py L367",
}
"""Targets vLLM 0.33 runs with PP > 1 when served alone; an architecture not listed gets no PP here."""

KIMI_GUIDE = (
    "Moonshot AI's Kimi-K2 deployment guide for vLLM (the deploy guidance of the Kimi-K2 and Kimi-K2.6 repositories): "
    "tensor parallelism on one node (TP 8 on an H200 node), data parallel + expert parallel "
    "(--enable-expert-parallel) across nodes"
)
DEFAULT_MOE_RULE = (
    "eaglehub's default for a MoE target whose publisher documents no vLLM layout: tensor parallelism on one "
    "node, data parallel + expert parallel across nodes"
)


@dataclass(frozen=True)
class Layout:
    """A vLLM layout: ``tp`` x ``pp`` GPUs a replica, ``dp`` replicas (``ep``: experts spread over all
    ``tp x dp`` ranks), on ``nodes`` nodes, workers started by ``backend``."""

    tp: int
    pp: int = 1
    dp: int = 1
    ep: bool = False
    nodes: int = 1
    backend: str = "uni"

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    def text(self) -> str:
        parts = (
            [f"TP {self.tp}"] + ([f"PP {self.pp}"] if self.pp > 1 else []) + ([f"DP {self.dp}"] if self.dp > 1 else [])
        )
        return " x ".join(parts) + (" + EP" if self.ep else "")


def architectures(config: dict) -> list[str]:
    """The target's architectures: the wrapper's, then its text model's (Kimi-K2.6: the wrapper)."""
    inner = config.get("text_config")
    inner = inner if isinstance(inner, dict) else {}
    return [str(a) for a in (config.get("architectures") or [])] + [str(a) for a in (inner.get("architectures") or [])]


def relays_aux_over_pp(config: dict) -> bool:
    """Whether vLLM 0.33 runs this target with EAGLE-3 and PP > 1: the architecture vLLM builds (the first
    listed, as vLLM resolves it) has a relaying decoder (:data:`RELAY_DECODERS`)."""
    archs = architectures(config)
    return bool(archs) and archs[0] in RELAY_DECODERS


def pp_allowed(config: dict, eagle3: bool) -> bool:
    """Whether vLLM 0.33 takes PP > 1 for this target: with an EAGLE-3 drafter a relaying decoder
    (:func:`relays_aux_over_pp`), alone a model class with SupportsPP (:data:`PP_ALONE`)."""
    if eagle3:
        return relays_aux_over_pp(config)
    archs = architectures(config)
    return bool(archs) and archs[0] in PP_ALONE


def is_moe(cfg: dict) -> bool:
    return n_experts(cfg) > 0


def publisher_rule(config: dict) -> str | None:
    """The deployment the target's publisher documents for vLLM, when eaglehub knows one (Kimi-K2 family)."""
    kinds = {str(config.get("model_type") or "")} | {str((config.get("text_config") or {}).get("model_type") or "")}
    return KIMI_GUIDE if kinds & {"kimi_k2", "kimi_k25"} else None


def refusal(
    layout: Layout, config: dict, cfg: dict, gpus_per_node: int, offline: bool, eagle3: bool = True
) -> str | None:
    """Why vLLM 0.33 refuses ``layout`` for this target (module doc), or None. ``config``: the target's
    config.json, ``cfg`` its text model's; ``offline``: the ``LLM(...)`` run; ``eagle3``: served with an
    EAGLE-3 drafter (the target alone is not held to the EAGLE-3 rules)."""
    heads = int(cfg.get("num_attention_heads") or 0)
    if heads and heads % layout.tp:
        return f"TP {layout.tp} does not divide the {heads} attention heads (vLLM config/model.py L1559)"
    arch = (architectures(config) or ["this target"])[0]
    if layout.pp > 1 and not eagle3 and not pp_allowed(config, eagle3):
        return (
            f"PP {layout.pp}: {arch} is not among the models eaglehub knows vLLM 0.33 runs with pipeline "
            "parallelism (SupportsPP; config/model.py L1570-1576)"
        )
    if layout.pp > 1 and eagle3 and not relays_aux_over_pp(config):
        return (
            f"PP {layout.pp}: {arch}'s decoder does not relay EAGLE-3 aux hidden states across pipeline stages "
            "(vLLM 0.33 eagle3_utils.py L57-63: 'does not support eagle3 with pipeline parallelism')"
        )
    if layout.pp > int(cfg.get("num_hidden_layers") or layout.pp):
        return f"PP {layout.pp} exceeds the {cfg.get('num_hidden_layers')} decoder layers"
    if layout.ep and not is_moe(cfg):
        return "expert parallelism needs a MoE target (vLLM config/model.py L1498-1503)"
    if layout.dp > 1 and offline:
        return "data parallelism is for vllm serve: eaglehub's LLM(...) run has one replica"
    replica = layout.tp * layout.pp
    if replica > gpus_per_node and layout.backend != "ray":
        return (
            f"{replica} GPUs a replica span nodes of {gpus_per_node}: vLLM starts them through Ray "
            "(--distributed-executor-backend ray; mp refuses a world larger than the node, config/parallel.py L1066)"
        )
    if layout.backend == "uni" and replica > 1:
        return f"the uni executor runs one GPU, not {replica}"
    if layout.backend == "external_launcher":
        return "external_launcher is torchrun's launch, not a serve line"
    return None
