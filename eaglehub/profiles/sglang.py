"""SGLang's reading of an EAGLE-3 drafter (SGLang 0.5.23; files under ``sglang/srt/``).

- Config: transformers' class for ``model_type``; there is no speculators reader, so a speculators
  checkpoint (no top-level ``model_type``) does not load. Classes: ``architectures[0]`` through the registry
  (``models/registry.py``, ``model_loader/utils.py`` L40-66): the EAGLE-3 drafters ``LlamaForCausalLMEagle3``
  (``models/llama_eagle3.py`` L387) and ``Eagle3DeepseekV2ForCausalLM`` (``models/kimi_k25_eagle3.py``
  L523); no Qwen3-style EAGLE-3 class. Any other class the registry has (a target class such as the EAGLE
  research layout's ``LlamaForCausalLM``) is built as it is, without ``fc``: it loads no EAGLE-3 head, and
  the EAGLE-3 worker then reads its ``hot_token_id``, which such a class lacks
  (``speculative/eagle_worker_v2.py`` L366).
- Llama: ``fc`` reads ``target_hidden_size`` (``hasattr``: a stored null is ``None`` and fails) times
  ``num_aux_hidden_states`` → nested id count → 3, with a bias when ``bias`` is set (L151-167);
  ``norm_before_fc`` nested-first (L169-175); ``fc_norm`` or ``use_aux_norm`` (L183-186). The decoder layer
  builds q/k/v without a bias whatever ``attention_bias`` says (L66-74; ``o_proj`` keeps Llama's
  ``attention_bias or bias``, ``models/llama.py`` L337-341) and its MLP without biases whatever
  ``mlp_bias`` says (L81-83, ``models/llama.py`` L98-115); there is no ``norm_before_residual`` switch: the
  first layer takes the residual before ``hidden_norm`` (L97-100). ``tie_word_embeddings`` makes ``lm_head``
  the embedding, ``vocab_size`` rows, the trained head unused (L300-314); config windows are ignored, the
  server's ``--speculative-draft-window-size`` applies (L286-299); stored names it has no parameter for are
  skipped without a word (L358-378).
- MLA (Kimi-K2.5): the aux count is the length of the nested, else top-level id list, else 3 (L48-59); no MLP
  bias (``DeepseekV2MLP``), the residual taken before ``hidden_norm`` (L159-161); a tied head as in Llama
  (L352-353).
- The target captures the nested ``eagle_config.eagle_aux_hidden_state_layer_ids`` only, each id plus one
  (C-out: the output of layer i); none gives ``[2, N//2, N-3]`` in input-of-layer terms
  (``model_executor/model_runner_components/spec_aux_hidden_state.py`` L185-196, ``models/llama.py``
  L929-941).
"""

from __future__ import annotations

from eaglehub.drafter.canonical import LLAMA, MLA
from eaglehub.profiles.checkpoint import ServedTarget, Stored
from eaglehub.profiles.common import (
    AUX,
    assemble,
    aux_lists,
    class_layout,
    config_dims,
    first_architecture,
    null_target_hidden,
)
from eaglehub.profiles.config import CLASS_DEFAULTS, block, id_list, int_value
from eaglehub.profiles.reading import ACCEPTED, IGNORED, SKIPPED, LoadFailure, Reading, WeightFate
from eaglehub.profiles.registry import SGLANG, Profile
from eaglehub.profiles.shapes import COLUMN, ROW, STACKED, STRICT, VOCAB, built_params, check_shapes, parameter_names

#: the release whose code these rules follow (its engine table lists the classes the registry builds)
RULES_VERSION = "0.5.23"
#: ``architectures[0]`` → (layer kind, SGLang class)
DRAFTER_CLASSES = {
    "LlamaForCausalLMEagle3": (LLAMA, "LlamaForCausalLMEagle3"),
    "Eagle3DeepseekV2ForCausalLM": (MLA, "Eagle3DeepseekV2ForCausalLM"),
}
#: the loaders that compare a stored tensor's shape with the parameter, by kind (eaglehub/profiles/shapes.py)
SHAPE_CITES = {
    STRICT: "sglang/srt/model_loader/weight_utils.py L1574-1586",
    VOCAB: "sglang/srt/layers/vocab_parallel_embedding.py L430-446",
    COLUMN: "sglang/srt/layers/linear.py L528-582, L1490-1550",
    ROW: "sglang/srt/layers/linear.py L1649-1711",
}
#: stored names the Llama drafter's loader renames first (``models/llama_eagle3.py`` L338-348)
LEGACY_NAMES = {
    "midlayer": "layers.0",
    "aux_norm_low": "fc_norm.0",
    "aux_norm_mid": "fc_norm.1",
    "aux_norm_high": "fc_norm.2",
}


def registry_builds(arch: str | None) -> bool:
    """SGLang's registry has a class named ``arch`` (a target, or a drafter of another method)."""
    from eaglehub.engines.tables import engine_table

    if arch is None:
        return False
    table = engine_table(SGLANG, RULES_VERSION)
    return table.knows(arch) or table.drafter(arch) is not None


def weight_fates(stored: Stored, params: tuple[str, ...], tie: bool) -> tuple[WeightFate, ...]:
    """Each stored tensor through ``LlamaForCausalLMEagle3.load_weights`` (``models/llama_eagle3.py``
    L325-378): legacy names renamed, ``d2t`` read into ``hot_token_id``, ``t2d`` dropped, q/k/v and gate/up
    stacked, a name with no parameter (``model.`` prefixed or not) skipped without a word."""
    known = set(params)
    out = []
    for stored_name in stored.tensors:
        name = stored_name
        for legacy, new in LEGACY_NAMES.items():
            if legacy in name:
                name = name.replace(legacy, new)
        if "d2t" in name:
            out.append(WeightFate(stored_name, ACCEPTED, "hot_token_id", "d2t becomes the hot-token map (L350-353)"))
            continue
        if "t2d" in name:
            out.append(WeightFate(stored_name, SKIPPED, None, "t2d is not read (L355-356)"))
            continue
        for old, new, _ in STACKED:
            if old in name:
                name = name.replace(old, new)
                break
        param = name if name in known else f"model.{name}"
        if param in known:
            out.append(WeightFate(stored_name, ACCEPTED, param, "loaded"))
        elif tie and "lm_head" in name:
            out.append(
                WeightFate(
                    stored_name, IGNORED, None, "tie_word_embeddings: lm_head is the embedding, this head is unused"
                )
            )
        else:
            why = f"LlamaForCausalLMEagle3 has no parameter {param}: the loader skips it without a word (L358-378)"
            if name.endswith(".bias") and (".self_attn." in name or ".mlp." in name):
                why = (
                    "LlamaForCausalLMEagle3 builds its q/k/v and MLP projections without biases whatever the config "
                    "says (models/llama_eagle3.py L66-83, models/llama.py L98-115): the loader skips it without a "
                    "word (L358-378)"
                )
            out.append(WeightFate(stored_name, IGNORED, None, why))
    return tuple(out)


def _target_class(stored: Stored, arch: str, dims, tie: bool) -> LoadFailure:
    """SGLang builds its target class ``arch``: the only stored name it loads is ``lm_head.weight`` (its own
    names carry ``model.``), into a ``vocab_size``-row head; then the EAGLE-3 worker reads ``hot_token_id``."""
    head = stored.tensors.get("lm_head.weight")
    want = (dims.vocab_size, dims.hidden_size)
    if not tie and head is not None and tuple(head) != want:
        return LoadFailure(
            "architectures",
            f"AssertionError: SGLang builds its target class {arch} from architectures [{arch!r}] (no fc, no aux "
            f"hidden states): lm_head.weight {list(head)} does not fit its {list(want)} head (vocab_size rows); "
            "the EAGLE-3 drafter class is LlamaForCausalLMEagle3",
            "sglang/srt/layers/vocab_parallel_embedding.py L430-440",
        )
    return LoadFailure(
        "architectures",
        f"AttributeError: SGLang builds its target class {arch} from architectures [{arch!r}] (no fc, no aux hidden "
        "states, no trained head layer loaded); its EAGLE-3 worker then reads hot_token_id, which the class does "
        "not have; the EAGLE-3 drafter class is LlamaForCausalLMEagle3",
        "sglang/srt/speculative/eagle_worker_v2.py L366",
    )


def read(stored: Stored, profile: Profile, target: ServedTarget | None = None) -> Reading:
    cfg = stored.config
    failures: list[LoadFailure] = []
    arch = first_architecture(cfg)
    if cfg.get("speculators_config") is not None:
        failures.append(
            LoadFailure(
                "speculators_config",
                "SGLang has no speculators reader: the checkpoint has no top-level model_type or drafter class",
                "sglang/srt/models/ (no speculators config class)",
            )
        )
    kind, cls = DRAFTER_CLASSES.get(arch or "", ("", None))
    other = cls is None and registry_builds(arch)
    if cls is None:
        kind = MLA if "kv_lora_rank" in cfg else LLAMA
        if other:
            cls = arch
        else:
            failures.append(
                LoadFailure(
                    "architectures",
                    f"SGLang has no class for architectures {cfg.get('architectures')!r} (its EAGLE-3 drafter classes "
                    "are LlamaForCausalLMEagle3 and Eagle3DeepseekV2ForCausalLM)",
                    "sglang/srt/model_loader/utils.py L40-66, models/llama_eagle3.py L387, kimi_k25_eagle3.py L523",
                )
            )
    dims = config_dims(cfg, CLASS_DEFAULTS[kind], kind)
    tie = cfg.get("tie_word_embeddings") is True
    nested = block(cfg, "eagle_config")
    A: int | None
    if kind == MLA:
        ids = nested.get(AUX)
        if ids is None:
            ids = cfg.get(AUX)
        A, a_key = (3, "default") if ids is None else (len(ids), f"eagle_config.{AUX}" if AUX in nested else AUX)
    elif int_value(cfg.get("num_aux_hidden_states")) is not None:
        A, a_key = cfg["num_aux_hidden_states"], "num_aux_hidden_states"
    elif nested.get(AUX):
        A, a_key = len(nested[AUX]), f"eagle_config.{AUX}"
    else:
        A, a_key = 3, "default"
    if dims.target_hidden_null and not other:
        failures.append(
            null_target_hidden(
                "sglang/srt/models/llama_eagle3.py L151-167", "hasattr finds the key, so hidden_size is not used"
            )
        )
    # the head: the embedding when tied (vocab_size rows), else draft_vocab_size rows
    Vd = dims.vocab_size if tie else dims.draft_vocab_size
    capture = id_list(nested.get(AUX))
    quant = block(cfg, "quantization_config")
    o_bias = bool(cfg.get("attention_bias")) or bool(cfg.get("bias"))
    fc_norm = bool(cfg.get("fc_norm") or cfg.get("use_aux_norm"))
    notes = []
    params = None
    if tie:
        notes.append("tie_word_embeddings: SGLang uses embed_tokens as lm_head (the trained head is not loaded)")
    if other:
        assert arch is not None  # registry_builds(None) is False
        failures.append(_target_class(stored, arch, dims, tie))
        A, a_key, Vd = None, "default", dims.vocab_size
        weights = tuple(
            WeightFate(n, IGNORED, None, f"{arch} is SGLang's target class, not an EAGLE-3 drafter")
            for n in stored.tensors
        )
    elif kind == LLAMA and cls is not None:
        lay = class_layout(
            dims,
            A,
            Vd,
            o_bias=o_bias,
            fc_bias=bool(cfg.get("bias")),
            fc_norm=fc_norm,
            lm_head=not tie,
        )
        params = parameter_names(lay)
        weights = weight_fates(stored, params, tie)
        if lay.sized and not quant:
            weights, wrong = check_shapes(
                weights, stored.tensors, built_params(lay), cls=cls, key=str, cites=SHAPE_CITES, row_pads=True
            )
            failures += wrong
    else:
        # the MLA class's parameters are not modelled: every name is taken as loaded (unknown names are skipped)
        weights = tuple(
            WeightFate(n, SKIPPED, None, "t2d is not read")
            if "t2d" in n
            else WeightFate(n, ACCEPTED, "hot_token_id" if "d2t" in n else None, "loaded, or skipped without a word")
            for n in stored.tensors
        )
    return assemble(
        profile,
        dims,
        architecture=arch,
        model_class=cls,
        layer_kind=kind,
        target_hidden_size=None if other else dims.target_hidden_size,
        num_aux_hidden_states=A,
        draft_vocab_size=Vd,
        aux_layer_ids=capture,
        aux_convention="C-out",
        aux_lists=aux_lists(cfg),
        fc_norm=fc_norm and not other,
        norm_output=dims.norm_output and not other,
        norm_before_fc=dims.norm_before_fc and not other,
        # no switch in either drafter class: the residual is taken before hidden_norm (module docstring)
        norm_before_residual=False,
        attention_bias=o_bias if other else False,
        mlp_bias=False,
        fc_bias=bool(cfg.get("bias")) and not other,
        vocab_map=stored.has("d2t") and not other,
        tie_word_embeddings=tie,
        sliding_windows=(None,) * min(dims.num_hidden_layers, 4096),
        quantization=quant.get("quant_method"),
        parameter_names=params,
        weights=weights,
        failures=tuple(failures),
        origin={"num_aux_hidden_states": a_key, "aux_layer_ids": f"eagle_config.{AUX}" if capture else "default"},
        notes=tuple(notes),
    )
