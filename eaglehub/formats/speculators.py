"""The speculators format (vllm-project/speculators; docs/formats.md §5, docs/vllm.md §2).

Config: ``speculators_model_type`` ``eagle3``, ``speculators_config`` (proposal methods, verifier),
a nested ``transformer_layer_config`` (Llama keys, ``vocab_size``), drafter keys at the top level
(``draft_vocab_size``, ``target_hidden_size``, flags, C-in aux ids); no top-level ``model_type``.
Tensors ``layers.{i}.*``. ``norm_before_residual`` defaults to **true** when absent (vLLM copies it
with that default). vLLM accepts ``llama``/``qwen3`` layer configs only, so there are no MLA
speculators drafters; ``fc_norm`` is sized ``[H]`` (needs ``Ht == H``) and ``norm_before_fc`` and
``fc_norm`` together are refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from eaglehub.drafter.canonical import AUX_KEY, C_IN, LLAMA, QWEN3, Drafter, attention_windows
from eaglehub.formats.base import Format, Loss, Reading, default_arch, read_aux_ids

#: keys of the speculators block that have no meaning in other formats (kept in ``carried``).
PRIVATE = (
    "architectures",
    "auto_map",
    "speculators_config",
    "speculators_model_type",
    "speculators_version",
    "has_no_defaults_at_init",
    "embed_requires_grad",
)
#: top-level keys vLLM's speculators adapter copies into the drafter config (vLLM 0.32/0.33
#: ``transformers_utils/configs/speculators/algos.py`` L30-50); every other model key must sit inside
#: ``transformer_layer_config``, or the adapter drops it (``num_aux_hidden_states``: fc built for 3;
#: ``quantization_config``: the drafter built unquantized)
ADAPTER_KEYS = (
    "draft_vocab_size",
    "target_hidden_size",
    "norm_before_residual",
    "norm_before_fc",
    "fc_norm",
    "norm_output",
    AUX_KEY,
)
#: canonical keys written at the top level (next to ``transformer_layer_config``): what the adapter reads,
#: and the checkpoint's own metadata
TOP_LEVEL = frozenset({*ADAPTER_KEYS, "torch_dtype", "dtype", "transformers_version"})
#: layer ``model_type`` → the drafter's layer kind: vLLM builds ``Eagle3LlamaForCausalLM`` or
#: ``Eagle3Qwen3ForCausalLM`` from these and refuses any other (docs/formats.md §10)
LAYER_KINDS = {"llama": LLAMA, "qwen3": QWEN3}
#: keys vLLM reads for the decoder layer's attention window from ``transformer_layer_config`` only
WINDOW_KEYS = ("sliding_window", "layer_types", "use_sliding_window", "max_window_layers")
DEFAULT_ARCH = "Eagle3Speculator"  # what `speculators convert` writes (docs/formats.md §5)


def default_block(target: dict | None, k: int = 3) -> dict:
    """A greedy ``speculators_config`` for verifier ``target`` (``{"name_or_path", "architectures"}``)."""
    return {
        "algorithm": "eagle3",
        "proposal_methods": [
            {
                "proposal_type": "greedy",
                "speculative_tokens": k,
                "verifier_accept_k": 1,
                "accept_tolerance": 0.0,
            }
        ],
        "default_proposal_method": "greedy",
        "verifier": {
            "name_or_path": (target or {}).get("name_or_path"),
            "architectures": (target or {}).get("architectures") or [],
        },
    }


@dataclass(frozen=True)
class SpeculatorsFormat(Format):
    def marker(self, raw: dict, metadata: dict) -> str | None:
        return "config has speculators_model_type" if "speculators_model_type" in raw else None

    def read(self, raw: dict, names: list[str], aux_override: str | None = None) -> Reading:
        layer = raw.get("transformer_layer_config")
        layer = dict(layer) if isinstance(layer, dict) else {}
        # the adapter copies target_hidden_size only when it is not null (vLLM algos.py L31-32): a null one is
        # the same as none, and the drafter reads hidden_size
        top = {
            k: v
            for k, v in raw.items()
            if k != "transformer_layer_config" and not (k == "target_hidden_size" and v is None)
        }
        carried: dict = {k: top.pop(k) for k in PRIVATE if k in top}
        carried.update(self.style(names))
        carried["layer_keys"] = list(layer)
        carried["top_keys"] = list(top)
        carried["layer_values"] = {k: layer[k] for k in layer if k in top and layer[k] != top[k]}
        # vLLM builds the layer from transformer_layer_config alone: window keys written only next
        # to it are not applied, so they are carried, not read
        ignored = {k: top.pop(k) for k in WINDOW_KEYS if k in top and k not in layer}
        if ignored:
            carried["top_window_keys"] = ignored
        kind = LAYER_KINDS.get(str(layer.get("model_type", "llama")), LLAMA)
        cfg = {**layer, **top, "architectures": [default_arch(kind)]}
        if "norm_before_residual" not in raw:
            cfg["norm_before_residual"] = True  # speculators' default, which vLLM applies (docs/vllm.md §2)
            carried["implicit_norm_before_residual"] = True
        aux = read_aux_ids(raw.get(AUX_KEY), AUX_KEY, True, C_IN, override=aux_override)
        verifier = (
            (carried.get("speculators_config") or {}).get("verifier")
            if isinstance(carried.get("speculators_config"), dict)
            else None
        )
        target = (
            {k: verifier[k] for k in ("name_or_path", "architectures") if verifier.get(k)}
            if isinstance(verifier, dict)
            else None
        )
        return Reading(cfg, aux, carried, target)

    def losses(self, d: Drafter) -> list[Loss]:
        out = super().losses(d)
        f = d.flags
        if f.fc_norm and d.dims.Ht != d.dims.H:
            out.append(
                Loss(
                    f"speculators sizes fc_norm [H] = [{d.dims.H}] but this drafter's aux states are Ht = {d.dims.Ht} wide",
                    tensors=tuple(n for n in d.names if n.startswith("fc_norm.")),
                    keys=("fc_norm",),
                )
            )
        if d.layer_kind == QWEN3 and d.config.get("model_type") != "qwen3":
            as_qwen3 = {**d.config, "model_type": "qwen3"}
            as_written = d.windows
            read_as_qwen3 = attention_windows(as_qwen3, len(as_written))  # over the same layers d.windows covers
            if read_as_qwen3 != as_written:
                out.append(
                    Loss(
                        f"speculators names a Qwen3-style layer by model_type qwen3, whose config class reads the "
                        f"window differently: {read_as_qwen3} instead of {as_written} per layer "
                        f"(model_type {d.config.get('model_type')!r}); set use_sliding_window / layer_types first",
                        keys=("sliding_window",),
                        fatal=True,
                    )
                )
        if f.fc_norm and f.norm_before_fc:
            out.append(
                Loss(
                    "speculators refuses fc_norm together with norm_before_fc",
                    tensors=("input_norm.weight",),
                    keys=("norm_before_fc",),
                )
            )
        return out

    def write_config(self, d: Drafter, carried: dict, target: dict | None) -> dict:
        flat = {k: v for k, v in d.config.items() if k != "architectures"}
        if d.layer_kind == QWEN3:
            flat["model_type"] = "qwen3"
        elif flat.get("model_type") == "qwen3":  # a Llama layer: vLLM would build a Qwen3 one from this
            flat["model_type"] = "llama"
        if d.aux.c_in is not None:
            flat[AUX_KEY] = list(d.aux.c_in)
        if carried.get("implicit_norm_before_residual") and flat.get("norm_before_residual") is True:
            flat.pop("norm_before_residual")
        else:
            flat["norm_before_residual"] = flat.get("norm_before_residual") is True  # explicit: the default is true
        layer_keys, top_keys = set(carried.get("layer_keys", ())), set(carried.get("top_keys", ()))
        layer, top = {}, {}
        for k, v in flat.items():
            # a key the adapter does not copy goes into the layer config even if the source kept it on top
            in_top = k in TOP_LEVEL and (k in top_keys or k not in layer_keys)
            in_layer = k in layer_keys or not in_top
            if in_top:
                top[k] = v
            if in_layer:
                layer[k] = carried.get("layer_values", {}).get(k, v)
        block = carried.get("speculators_config")
        if not isinstance(block, dict):
            block = default_block(target)
        elif target is not None:
            block = {
                **block,
                "verifier": {**(block.get("verifier") or {}), **{k: v for k, v in target.items() if v}},
            }
        top.update(carried.get("top_window_keys") or {})
        head = {k: carried[k] for k in PRIVATE if k in carried and k != "speculators_config"}
        head.setdefault("architectures", [DEFAULT_ARCH])
        head.setdefault("speculators_model_type", "eagle3")
        # speculators_version stays only when the source carried it: it stamps what speculators wrote, and its
        # config class defaults it (speculators 0.9.0 config.py L277), so an output of other weights leaves it out
        return {**head, **top, "speculators_config": block, "transformer_layer_config": layer}
