"""Ask vLLM's own code which targets it runs with EAGLE-3 and pipeline parallelism (run with the vLLM 0.33
environment's python; tests/test_launch_plan.py's engine-tier test compares eaglehub.plan.rules with it).

For each architecture: vLLM's model registry resolves it to its model class, the decoder class that model
holds is taken from the class's own module, and vLLM's ``verify_supports_aux_hidden_states_over_pp`` (what
Model Runner V2 calls when PP > 1) is asked about a model holding that decoder, through the same lookup
(``get_language_model`` / ``language_model`` / ``model``) vLLM does. Prints ``{architecture: true | false |
"error: ..."}`` as JSON. No weights and no GPU: the decoder is an uninitialised instance of its class."""

from __future__ import annotations

import importlib
import inspect
import json
import re
import sys
from types import SimpleNamespace

#: architecture -> (the decoder class its model holds, whether a wrapper holds it as language_model.model)
CASES = {
    "LlamaForCausalLM": ("LlamaModel", False),
    "MistralForCausalLM": ("MistralModel", False),
    "Qwen2ForCausalLM": ("Qwen2Model", False),
    "Qwen3ForCausalLM": ("Qwen3Model", False),
    "Glm4ForCausalLM": ("Glm4Model", False),
    "SarvamMLAForCausalLM": ("SarvamMLAModel", False),
    "DeepseekV3ForCausalLM": ("DeepseekV2Model", False),
    "Qwen3MoeForCausalLM": ("Qwen3MoeModel", False),
    "MiMoForCausalLM": ("MiMoModel", False),
    "KimiK25ForConditionalGeneration": ("DeepseekV2Model", True),
}
#: a wrapper's language model's module (Kimi-K2.5/K2.6 wrap DeepSeek-V3)
INNER_MODULE = {"KimiK25ForConditionalGeneration": "vllm.model_executor.models.deepseek_v2"}


def ask(arch: str, decoder: str, wrapped: bool) -> bool | str:
    from vllm.model_executor.models.registry import ModelRegistry
    from vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils import verify_supports_aux_hidden_states_over_pp

    model_cls = ModelRegistry._try_load_model_cls(arch)
    if model_cls is None:
        return "error: the registry does not load it"
    module = importlib.import_module(INNER_MODULE.get(arch, model_cls.__module__))
    holder = module.DeepseekV3ForCausalLM if wrapped else model_cls
    sources = [inspect.getsource(c) for c in holder.__mro__ if c.__module__.startswith("vllm.")]
    if not any(re.search(rf"(=|return)\s*{decoder}\b", src) for src in sources):
        return f"error: {holder.__name__} does not build a {decoder}"
    inner = object.__new__(getattr(module, decoder))
    model = SimpleNamespace(language_model=SimpleNamespace(model=inner)) if wrapped else SimpleNamespace(model=inner)
    try:
        verify_supports_aux_hidden_states_over_pp(model, "eagle3")  # type: ignore[arg-type]
    except ValueError:
        return False
    return True


def main() -> None:
    out: dict[str, bool | str] = {}
    for arch, (decoder, wrapped) in CASES.items():
        try:
            out[arch] = ask(arch, decoder, wrapped)
        except Exception as exc:
            out[arch] = f"error: {type(exc).__name__}: {exc}"
    json.dump(out, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
