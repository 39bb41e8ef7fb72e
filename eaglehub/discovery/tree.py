"""The Hub's model tree as eaglehub reads it: base models, their relation, and what a config says
about a repo being a drafter.

A model card's ``base_model`` names the model a repo derives from; the Hub turns it into the tags
``base_model:<id>`` and ``base_model:<relation>:<id>``, the relation being the card's
``base_model_relation`` or the one the Hub infers (``adapter``, ``quantized``, ``merge``,
``finetune``). eaglehub's ``publish`` writes the drafter's target as ``base_model``, so a target's
drafters are the repos tagged ``base_model:<target>`` whose config (or tags) says drafter; a
quantized target names its own base with relation ``quantized``, whose drafters serve it too.
"""

from __future__ import annotations

from dataclasses import dataclass

from eaglehub.drafter.canonical import MLA_ARCHITECTURES, QWEN3_ARCHITECTURES, architecture, read_flags

RELATIONS = ("quantized", "finetune", "adapter", "merge")
TAG_PREFIX = "base_model:"
DRAFTER_TAGS = frozenset({"eagle3", "eagle3.1", "eagle-3", "speculative-decoding", "draft-model", "eagle"})
"""Card tags that mark a drafter when its config alone does not (a class eaglehub does not know yet)."""
EAGLE3_CLASSES = frozenset(
    {
        "Eagle3LlamaForCausalLM",
        "LlamaForCausalLMEagle3",
        "Eagle3DraftModel",
        "Eagle3Speculator",
        "Eagle3MiniMaxM2ForCausalLM",
        "Eagle3Qwen2_5vlForCausalLM",
        "Eagle3Qwen3vlForCausalLM",
        "PEagleDraftModel",
        "PeagleLlamaForCausalLM",
        *MLA_ARCHITECTURES,
        *QWEN3_ARCHITECTURES,
    }
)
"""Drafter classes of every layout eaglehub reads (docs/formats.md); the EAGLE research class
``LlamaForCausalLM`` counts only with a ``draft_vocab_size``, which no target config has."""
MAX_DEPTH = 4
"""Quantized-of-quantized chains deeper than this are not followed (none is known; it stops cycles)."""


@dataclass(frozen=True)
class Base:
    """A base model a repo names: its id and the relation (``quantized``, ``finetune``, ...)."""

    repo_id: str
    relation: str


def bases_from_tags(tags: list[str] | None) -> list[Base]:
    """The base models in a repo's model-tree tags (``base_model:<relation>:<id>``), in tag order."""
    out: list[Base] = []
    for tag in tags or []:
        rest = tag[len(TAG_PREFIX) :] if tag.startswith(TAG_PREFIX) else None
        if rest is None:
            continue
        relation, _, repo_id = rest.partition(":")
        if relation in RELATIONS and "/" in repo_id and Base(repo_id, relation) not in out:
            out.append(Base(repo_id, relation))
    return out


def bases_from_card(card: dict | None, config: dict | None = None, files: list[str] | None = None) -> list[Base]:
    """The base models a card's metadata names, with the relation the Hub would give them: the card's
    ``base_model_relation``, else ``adapter`` (adapter_config.json), ``quantized`` (a config
    ``quantization_config`` or GGUF files), ``merge`` (several bases), ``finetune``. For a cached repo,
    whose tags are not stored."""
    card = card or {}
    raw = card.get("base_model") or []
    ids = [raw] if isinstance(raw, str) else [b for b in raw if isinstance(b, str)] if isinstance(raw, list) else []
    relation = card.get("base_model_relation")
    if relation not in RELATIONS:
        names = files or []
        if "adapter_config.json" in names:
            relation = "adapter"
        elif (isinstance(config, dict) and config.get("quantization_config")) or any(
            n.endswith(".gguf") for n in names
        ):
            relation = "quantized"
        else:
            relation = "merge" if len(ids) > 1 else "finetune"
    return [Base(i, relation) for i in ids if "/" in i]


@dataclass(frozen=True)
class ConfigView:
    """What a config says of a drafter without its tensors: layout (from the class and markers),
    EAGLE version (3.1 when ``fc_norm`` or ``norm_output`` is on), ``num_speculative_tokens`` when the
    config records it, and the evidence."""

    format: str
    eagle_version: str
    architecture: str | None
    num_speculative_tokens: int | None
    evidence: str


def drafter_view(config: dict | None, tags: list[str] | None = None) -> ConfigView | None:
    """A :class:`ConfigView` when ``config`` (or, failing that, ``tags``) marks an EAGLE-3 drafter, else ``None``."""
    cfg = config if isinstance(config, dict) else {}
    arch = architecture(cfg)
    k = _config_k(cfg)
    version = "3.1" if _is_31(cfg) else "3"
    if "speculators_model_type" in cfg:
        return ConfigView("speculators", version, arch, k, f"speculators_model_type {cfg['speculators_model_type']!r}")
    if "_torchspec_version" in cfg:
        return ConfigView("torchspec", version, arch, k, "config has _torchspec_version")
    nested = cfg.get("eagle_config")
    if isinstance(nested, dict) and "next_layer_regular" in nested:
        return ConfigView("modelopt", version, arch, k, "eagle_config.next_layer_regular (ModelOpt export)")
    if arch in EAGLE3_CLASSES:
        return ConfigView("vllm", version, arch, k, f"architectures[0] = {arch}")
    if arch == "LlamaForCausalLM" and "draft_vocab_size" in cfg:
        return ConfigView("vllm", version, arch, k, "LlamaForCausalLM with draft_vocab_size (EAGLE research layout)")
    marked = sorted(DRAFTER_TAGS & set(tags or []))
    if marked:
        return ConfigView("unknown", version, arch, k, f"card tags {', '.join(marked)}")
    return None


def _is_31(cfg: dict) -> bool:
    flags = read_flags(cfg)
    layer = cfg.get("transformer_layer_config")
    nested = read_flags(layer) if isinstance(layer, dict) else flags
    return flags.fc_norm or flags.norm_output or nested.fc_norm or nested.norm_output


def _config_k(cfg: dict) -> int | None:
    spec = cfg.get("speculators_config")
    methods = spec.get("proposal_methods") if isinstance(spec, dict) else None
    if isinstance(methods, list) and methods and isinstance(methods[0], dict):
        k = methods[0].get("speculative_tokens")
        if isinstance(k, int) and not isinstance(k, bool) and k > 0:
            return k
    k = cfg.get("num_speculative_tokens")
    return k if isinstance(k, int) and not isinstance(k, bool) and k > 0 else None
