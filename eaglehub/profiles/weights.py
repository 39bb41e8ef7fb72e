"""vLLM's drafter parameters and weight loader: the names each class registers and what happens to each stored
tensor (``llama_eagle3.py`` L420-470, ``models/utils.py`` L431-458 and ``AutoWeightsLoader.load_weights``)."""

from __future__ import annotations

from eaglehub.drafter.canonical import MLA
from eaglehub.profiles.checkpoint import Stored
from eaglehub.profiles.reading import ACCEPTED, FATAL, IGNORED, SKIPPED, WeightFate
from eaglehub.profiles.shapes import STACKED, Layout, parameter_names

#: checkpoint tensor suffixes a quantization config maps onto its own parameters
QUANT_SUFFIXES = (
    ".weight_scale",
    ".input_scale",
    ".weight_zero_point",
    ".weight_packed",
    ".weight_shape",
    ".k_scale",
    ".v_scale",
)


def expected_params(lay: Layout, kind: str) -> tuple[str, ...] | None:
    """The parameter names the vLLM drafter class registers (its ``named_parameters()``); ``None`` for the MLA
    class, whose parameters eaglehub does not model."""
    return None if kind == MLA else parameter_names(lay)


def weight_fates(stored: Stored, params: tuple[str, ...] | None, r: dict) -> tuple[WeightFate, ...]:
    """Each stored tensor through ``Eagle3LlamaForCausalLM.load_weights`` (``llama_eagle3.py`` L420-470) and
    the ``AutoWeightsLoader`` under it."""
    if params is None:
        return ()
    known = set(params)
    out = []
    for name in stored.tensors:
        if "t2d" in name:
            out.append(WeightFate(name, SKIPPED, None, "t2d is not read (llama_eagle3.py L426-427)"))
            continue
        if "mask_hidden" in name:
            out.append(WeightFate(name, SKIPPED, None, "mask_hidden is read only for parallel drafting"))
            continue
        if "d2t" in name:
            target = name.replace("d2t", "draft_id_to_target_id")
        elif "lm_head" not in name:
            target = "model." + name
        else:
            target = name
        target = target.replace("midlayer.", "layers.0.")
        if target.startswith("model.fc.") and not r["use_aux_hidden_state"]:
            out.append(WeightFate(name, SKIPPED, None, "fc is dropped when use_aux_hidden_state is false"))
            continue
        if ".input_norm." in f".{target}" and not r["norm_before_fc"]:
            out.append(
                WeightFate(
                    name, SKIPPED, None, "input_norm is dropped when norm_before_fc is false (llama_eagle3.py L464-465)"
                )
            )
            continue
        for old, new, _ in STACKED:
            if old in target:
                target = target.replace(old, new)
                break
        if target in known:
            out.append(WeightFate(name, ACCEPTED, target, "loaded"))
        elif r["quantization"] and target.endswith(QUANT_SUFFIXES):
            out.append(WeightFate(name, ACCEPTED, target, f"read by the {r['quantization']} quantization config"))
        elif target.endswith(".bias"):
            out.append(
                WeightFate(
                    name,
                    IGNORED,
                    None,
                    "an unexpected bias: AutoWeightsLoader skips it without a word (models/utils.py, load_weights)",
                )
            )
        else:
            why = f"ValueError: There is no module or parameter named {target!r} (models/utils.py L431-458)"
            out.append(WeightFate(name, FATAL, None, why))
    return tuple(out)
