"""Drafter ↔ target pairing findings (``validate --target``), each from a minimal pair built here:
the tiny drafter D and target T of conftest (docs/failure-kinds.md "Fixtures"), with one field changed.

Every code gets a case, a variant of the same fault through another field or size, and negatives
(the matching pair gives none of these findings). Covered: F4 (target architecture vs vLLM's
table), F22 (attention family), F13 (context length), special-token ids, tokenizer size and
identity, F25 (chat template), F19 (quantized target), F12 (non-default aux ids), the embedding
comparison without target weights, and a hub-id target read from a Hugging Face cache without weights.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from helpers.checkpoints import V
from test_convert_formats import make_hub_cache, tree_state
from test_findings import setk, to_mla
from test_no_torch import _assert_light
from test_no_torch import _run as run_light

from eaglehub.checks.context import TARGET_SIDE_FILES, read_target
from eaglehub.checks.validate import Options, validate
from eaglehub.cli import main
from eaglehub.convert.run import convert
from eaglehub.io.schemas import validate_json

#: the codes this file is about; other checks' findings are filtered out so each test states exactly these
PAIRING = (
    "E-TARGET-NO-EAGLE3",
    "W-TARGET-UNKNOWN-ARCH",
    "W-TARGET-FAMILY",
    "W-CONTEXT-SHORT",
    "I-TOKENS-SPECIAL",
    "E-TOKENIZER-SIZE",
    "W-TOKENIZER-MISMATCH",
    "W-TEMPLATE-CHANGED",
    "I-QUANT-PAIRING",
    "W-AUX-NONDEFAULT",
    "I-EMBED-SHARED",
    "I-EMBED-TRAINED",
    "E-EMBED-MISSING",
)
AUX = "eagle_aux_hidden_state_layer_ids"
TEMPLATE = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"


def pairing(drafter, target, **kw) -> list[tuple[str, str]]:
    """``(code, subject)`` of the pairing findings of ``validate(drafter, target)`` (report schema-checked)."""
    report = validate(drafter, target, **kw)
    validate_json(report, "validate-report")
    return [(f["code"], f["subject"]) for f in report["findings"] if f["code"] in PAIRING]


def messages(drafter, target, code: str) -> list[str]:
    return [f["message"] for f in validate(drafter, target)["findings"] if f["code"] == code]


def write_tokenizer(path: Path, n: int, added: tuple[str, ...] = (), rename: dict[int, str] | None = None) -> Path:
    """A WordLevel ``tokenizer.json`` with tokens ``t0..t{n-1}`` (``rename``: other names for some ids)
    and special ``added`` tokens after them, written by the tokenizers library."""
    from tokenizers import Tokenizer, models

    vocab = {(rename or {}).get(i, f"t{i}"): i for i in range(n)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=next(iter(vocab))))
    tok.add_special_tokens(list(added))
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return path


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data, indent=2))
    return path


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_clean_pair_with_every_side_file_has_no_pairing_findings(make_drafter, make_target):
    """D and T sharing tokenizer, template record, special tokens and context: nothing to report."""
    drafter = make_drafter(mutate=lambda cfg, t: cfg.update(bos_token_id=1, eos_token_id=2))
    target = make_target(8, bos_token_id=1, eos_token_id=2)
    write_tokenizer(target / "tokenizer.json", V - 2, added=("<s>", "</s>"))
    write_tokenizer(drafter / "tokenizer.json", V - 2, added=("<s>", "</s>"))
    (target / "chat_template.jinja").write_text(TEMPLATE)
    write_json(target / "generation_config.json", {"bos_token_id": 1, "eos_token_id": [2, 3]})
    write_json(drafter / "training.json", {"chat_template_sha256": sha(TEMPLATE), "max_seq_len": 4096})
    assert validate(drafter, target)["findings"] == []


# --- F4: the target architecture against vLLM's table ---------------------------------------------


def test_profile_tables_are_the_releases_own_or_the_nearest_below():
    """Each profile is judged with its release's engine table; a release without one gets the nearest shipped
    release at or below it (the oldest when none is), and the choice is stated."""
    from eaglehub.engines.tables import profile_table, table_for
    from eaglehub.profiles import resolve

    assert profile_table(resolve("vllm-0.32-cpu")).table.version == "0.32.0"
    assert profile_table(resolve("vllm-0.33-gpu")).table.version == "0.33.0"
    assert profile_table(resolve("sglang-0.5.23")).table.engine == "sglang"
    assert [table_for("vllm", v).table.version for v in ("0.32.4", "0.33", "0.34.1", "0.31.0")] == [
        "0.32.0",
        "0.33.0",
        "0.33.0",
        "0.32.0",
    ]
    assert table_for("vllm", "0.33.0").note is None
    assert "nearest release at or below" in table_for("vllm", "0.32.4").note
    assert "oldest shipped" in table_for("vllm", "0.31.0").note


def test_default_profile_mla_types_come_from_vllm():
    from eaglehub.checks.target import _mla_model_types

    assert {"deepseek_v3", "kimi_k2"} <= _mla_model_types() and "llama" not in _mla_model_types()


@pytest.mark.parametrize("arch", ["GPT2LMHeadModel", "MixtralForCausalLM"])
def test_registered_target_without_eagle3(make_drafter, make_target, arch):
    target = make_target(8, architectures=[arch])
    assert pairing(make_drafter(), target) == [("E-TARGET-NO-EAGLE3", "target architectures")]
    msg = messages(make_drafter("d2"), target, "E-TARGET-NO-EAGLE3")[0]
    assert msg.startswith("vLLM 0.33.0 on GPU (Model Runner V2): ") and "registered in vLLM 0.33.0 but" in msg


@pytest.mark.parametrize("arch", ["GraniteMoeForCausalLM", "GraniteMoeSharedForCausalLM", "GraniteMoeSWAForCausalLM"])
def test_granite_moe_targets_are_eagle3_capable_from_vllm_033(make_drafter, make_target, arch):
    """vLLM 0.33 gives the Granite MoE classes SupportsEagle3; 0.32 registers them without it. Each profile is
    judged with its own release's table, so the same pair is an error on 0.32 only."""
    target = make_target(8, architectures=[arch])
    on_032 = validate(make_drafter(), target, options=Options(profiles=("vllm-0.32-cpu",)))
    (f,) = [f for f in on_032["findings"] if f["code"] in PAIRING]
    assert (f["code"], f["profiles"]) == ("E-TARGET-NO-EAGLE3", ["vllm-0.32-cpu"])
    assert f"{arch} is registered in vLLM 0.32.0 but" in f["message"]
    on_033 = validate(make_drafter("d2"), target, options=Options(profiles=("vllm-0.33-gpu", "vllm-0.33-v1")))
    assert [f["code"] for f in on_033["findings"] if f["code"] in PAIRING] == []
    both = validate(make_drafter("d3"), target, options=Options(profiles=("vllm-0.33-gpu", "vllm-0.32-gpu")))
    (f,) = [f for f in both["findings"] if f["code"] in PAIRING]
    assert f["profiles"] == ["vllm-0.32-gpu"] and f["message"].endswith("(not on vLLM 0.33.0 on GPU (Model Runner V2))")
    # --vllm-version alone: that release on GPU; a patch release without a table is read with its minor's
    assert pairing(make_drafter("d4"), target, options=Options(vllm_version="0.33.2")) == []
    old = validate(make_drafter("d5"), target, options=Options(vllm_version="0.32.1"))
    (f,) = [f for f in old["findings"] if f["code"] in PAIRING]
    assert "eaglehub's table for vLLM 0.32.1 is vLLM 0.32.0's, the nearest release at or below it" in f["message"]


def test_sglang_profile_judges_the_target_with_sglang_table(make_drafter, make_target):
    """SGLang captures aux states only from classes with set_eagle3_layers_to_capture; a class it does not
    register goes to its Transformers fallback, which has none."""
    opts = Options(profiles=("sglang-0.5.23", "vllm-0.33-gpu"))
    granite = validate(make_drafter(), make_target(8, architectures=["GraniteForCausalLM"]), options=opts)
    (f,) = [f for f in granite["findings"] if f["code"] in PAIRING]
    assert (f["code"], f["profiles"]) == ("E-TARGET-NO-EAGLE3", ["sglang-0.5.23"])
    assert "set_eagle3_layers_to_capture" in f["message"] and "SGLang 0.5.23" in f["message"]
    unknown = validate(make_drafter("d2"), make_target(8, name="t2", architectures=["WobblyForCausalLM"]), options=opts)
    codes = sorted((f["code"], tuple(f["profiles"])) for f in unknown["findings"] if f["code"] in PAIRING)
    assert codes == [("E-TARGET-NO-EAGLE3", ("sglang-0.5.23",)), ("W-TARGET-UNKNOWN-ARCH", ("vllm-0.33-gpu",))]
    assert pairing(make_drafter("d3"), make_target(8, name="t3"), options=opts) == []


def test_multimodal_target_is_judged_by_its_outer_class(make_drafter, make_target):
    """Gemma3ForConditionalGeneration lacks SupportsEagle3 although its text model is a plain causal LM;
    Qwen2_5_VLForConditionalGeneration has it."""
    text = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 64,
        "vocab_size": V,
        "num_hidden_layers": 8,
    }
    bad = make_target(8, name="gemma3", architectures=["Gemma3ForConditionalGeneration"], text_config=text)
    good = make_target(8, name="qwen25vl", architectures=["Qwen2_5_VLForConditionalGeneration"], text_config=text)
    assert pairing(make_drafter(), bad) == [("E-TARGET-NO-EAGLE3", "target architectures")]
    assert pairing(make_drafter("d2"), good) == []


@pytest.mark.parametrize("arch", ["WobblyForCausalLM", "LlamaForCausalLMEagle3"])
def test_unknown_target_architecture(make_drafter, make_target, arch):
    target = make_target(8, architectures=[arch])
    assert pairing(make_drafter(), target) == [("W-TARGET-UNKNOWN-ARCH", "target architectures")]


def test_unknown_architecture_names_both_versions_when_they_differ(make_drafter, make_target):
    target = make_target(8, architectures=["WobblyForCausalLM"])
    report = validate(make_drafter(), target, options=Options(vllm_version="0.99.0"))
    msg = next(f["message"] for f in report["findings"] if f["code"] == "W-TARGET-UNKNOWN-ARCH")
    assert "eaglehub's table for vLLM 0.99.0 is vLLM 0.33.0's, the nearest release at or below it" in msg


@pytest.mark.parametrize("arch", ["LlamaForCausalLM", "Qwen3ForCausalLM", "SmolLM3ForCausalLM"])
def test_eagle3_targets_pass(make_drafter, make_target, arch):
    """SmolLM3 is served through vLLM's Transformers backend, which implements SupportsEagle3."""
    assert pairing(make_drafter(), make_target(8, architectures=[arch])) == []


def test_target_without_architectures_is_not_judged(make_drafter, make_target):
    target = make_target(8)
    cfg = json.loads((target / "config.json").read_text())
    del cfg["architectures"]
    (target / "config.json").write_text(json.dumps(cfg))
    assert pairing(make_drafter(), target) == []


# --- F22: attention family -------------------------------------------------------------------------

MLA_TARGET = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "kimi_k2",
    "kv_lora_rank": 32,
    "q_lora_rank": 32,
    "qk_rope_head_dim": 16,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
}


def test_mha_drafter_for_mla_target(make_drafter, make_target):
    target = make_target(8, **MLA_TARGET)
    assert pairing(make_drafter(), target) == [("W-TARGET-FAMILY", "architectures")]
    assert "kv_lora_rank 32" in messages(make_drafter("d2"), target, "W-TARGET-FAMILY")[0]


def test_mla_target_by_model_type_alone(make_drafter, make_target):
    """No kv_lora_rank key: vLLM's MLA model types count (transformers' DeepSeek configs default the rank)."""
    target = make_target(8, architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3")
    assert pairing(make_drafter(), target) == [("W-TARGET-FAMILY", "architectures")]
    assert "model_type deepseek_v3" in messages(make_drafter("d2"), target, "W-TARGET-FAMILY")[0]


def test_mla_drafter_for_mha_target(make_drafter, make_target):
    assert pairing(make_drafter(mutate=to_mla), make_target(8)) == [("W-TARGET-FAMILY", "architectures")]


def test_matching_families_and_mha_deepseek(make_drafter, make_target):
    """MLA with MLA and MHA with MHA are fine; kv_lora_rank null makes a DeepSeek-V2 config MHA in vLLM."""
    assert pairing(make_drafter("mla", mutate=to_mla), make_target(8, name="mla-t", **MLA_TARGET)) == []
    mha_deepseek = make_target(
        8, name="v2-mha", architectures=["DeepseekV2ForCausalLM"], model_type="deepseek_v2", kv_lora_rank=None
    )
    assert pairing(make_drafter("llama"), mha_deepseek) == []


def test_kimi_k25_wrapper_is_mla(make_drafter, make_target):
    text = {
        "model_type": "kimi_k2",
        "kv_lora_rank": 512,
        "hidden_size": 64,
        "vocab_size": V,
        "num_hidden_layers": 8,
    }
    target = make_target(8, architectures=["KimiK25ForConditionalGeneration"], model_type="kimi_k25", text_config=text)
    assert pairing(make_drafter(), target) == [("W-TARGET-FAMILY", "architectures")]


# --- F13: context length ---------------------------------------------------------------------------


def test_drafter_configured_for_fewer_positions(make_drafter, make_target):
    drafter = make_drafter(mutate=setk("max_position_embeddings", 2048))
    target = make_target(8)
    assert pairing(drafter, target) == [("W-CONTEXT-SHORT", "max_position_embeddings")]
    msg = messages(drafter, target, "W-CONTEXT-SHORT")[0]
    assert (
        "2048 < the target's 4096" in msg and "_maybe_override_draft_max_position_embeddings" in msg and "#48894" in msg
    )


def test_drafter_trained_on_shorter_sequences(make_drafter, make_target):
    """Config and target agree (4096), but training.json records 1024-token training sequences."""
    drafter = make_drafter()
    write_json(drafter / "training.json", {"max_seq_len": 1024})
    assert pairing(drafter, make_target(8)) == [("W-CONTEXT-SHORT", "training.json max_seq_len")]


def test_multimodal_target_positions_come_from_text_config(make_drafter, make_target):
    text = {"max_position_embeddings": 32768, "hidden_size": 64, "vocab_size": V, "num_hidden_layers": 8}
    target = make_target(8, architectures=["Qwen2_5_VLForConditionalGeneration"], text_config=text)
    assert pairing(make_drafter(), target) == [("W-CONTEXT-SHORT", "max_position_embeddings")]


def test_long_enough_drafter(make_drafter, make_target):
    drafter = make_drafter(mutate=setk("max_position_embeddings", 8192))
    write_json(drafter / "training.json", {"max_seq_len": 4096, "settings": {"token_budget": "3072"}})
    assert pairing(drafter, make_target(8)) == []


# --- special-token ids ----------------------------------------------------------------------------


def test_rewritten_eos(make_drafter, make_target):
    drafter = make_drafter(mutate=lambda cfg, t: cfg.update(bos_token_id=128000, eos_token_id=2))
    target = make_target(8, bos_token_id=128000, eos_token_id=128001)
    assert pairing(drafter, target) == [("I-TOKENS-SPECIAL", "eos_token_id")]
    assert messages(drafter, target, "I-TOKENS-SPECIAL") == [
        "drafter eos_token_id 2 is not the target's [128001] (config.json): no engine reads it (they stop on the "
        "target's ids), but a converter may have rewritten the config"
    ]


def test_rewritten_bos_against_generation_config(make_drafter, make_target):
    """The target's config has no special ids; generation_config.json has them."""
    drafter = make_drafter(mutate=lambda cfg, t: cfg.update(bos_token_id=1, eos_token_id=128009, pad_token_id=0))
    target = make_target(8)
    write_json(
        target / "generation_config.json",
        {"bos_token_id": 128000, "eos_token_id": [128001, 128009], "pad_token_id": 0},
    )
    assert pairing(drafter, target) == [("I-TOKENS-SPECIAL", "bos_token_id")]


def test_special_ids_the_target_uses_are_fine(make_drafter, make_target):
    """eos in the union of config and generation_config; pad the target does not declare; no ids at all."""
    drafter = make_drafter(mutate=lambda cfg, t: cfg.update(eos_token_id=151645, pad_token_id=7))
    target = make_target(8, eos_token_id=151643)
    write_json(target / "generation_config.json", {"eos_token_id": [151645, 151643]})
    assert pairing(drafter, target) == []
    assert pairing(make_drafter("plain"), make_target(8, name="t2", bos_token_id=1, eos_token_id=2)) == []


# --- tokenizer size and identity -------------------------------------------------------------------


def test_tokenizer_larger_than_vocab(make_drafter, make_target):
    target = make_target(8)
    write_tokenizer(target / "tokenizer.json", 300)
    assert pairing(make_drafter(), target) == [("E-TOKENIZER-SIZE", "vocab_size")]
    assert "ids up to 299" in messages(make_drafter("d2"), target, "E-TOKENIZER-SIZE")[0]


def test_added_tokens_push_the_tokenizer_past_vocab(make_drafter, make_target):
    """250 base tokens fit; 10 added special tokens (ids 250..259) do not."""
    target = make_target(8)
    write_tokenizer(target / "tokenizer.json", 250, added=tuple(f"<extra_{i}>" for i in range(10)))
    assert pairing(make_drafter(), target) == [("E-TOKENIZER-SIZE", "vocab_size")]


def test_tokenizer_config_added_tokens_count(make_drafter, make_target):
    target = make_target(8)
    write_tokenizer(target / "tokenizer.json", V)
    write_json(
        target / "tokenizer_config.json",
        {"added_tokens_decoder": {"256": {"content": "<tool>", "special": True}}},
    )
    assert pairing(make_drafter(), target) == [("E-TOKENIZER-SIZE", "vocab_size")]


def test_tokenizer_past_both_vocabularies(make_drafter, make_target):
    """Drafter 256, target 200 (E-VOCAB-MISMATCH too): the 300-token tokenizer overflows both tables."""
    target = make_target(8, vocab=200)
    write_tokenizer(target / "tokenizer.json", 300)
    assert pairing(make_drafter(), target) == [
        ("E-TOKENIZER-SIZE", "vocab_size"),
        ("E-TOKENIZER-SIZE", "target vocab_size"),
    ]


@pytest.mark.parametrize("n", [V, 200])
def test_tokenizer_within_vocab(make_drafter, make_target, n):
    """Exactly V tokens, or fewer (vocab tables are often padded past the tokenizer)."""
    target = make_target(8)
    write_tokenizer(target / "tokenizer.json", n)
    assert pairing(make_drafter(), target) == []


def test_drafter_ships_another_tokenizer(make_drafter, make_target):
    target, drafter = make_target(8), make_drafter()
    write_tokenizer(target / "tokenizer.json", 250)
    write_tokenizer(drafter / "tokenizer.json", 250, rename={17: "hello"})
    assert pairing(drafter, target) == [("W-TOKENIZER-MISMATCH", "tokenizer.json")]
    assert "2 token/id pairs differ" in messages(drafter, target, "W-TOKENIZER-MISMATCH")[0]


def test_drafter_tokenizer_with_other_added_tokens(make_drafter, make_target):
    target, drafter = make_target(8), make_drafter()
    write_tokenizer(target / "tokenizer.json", 250, added=("<s>",))
    write_tokenizer(drafter / "tokenizer.json", 250, added=("<bos>",))
    assert pairing(drafter, target) == [("W-TOKENIZER-MISMATCH", "tokenizer.json")]


def test_same_tokenizer_in_other_bytes_is_not_a_mismatch(make_drafter, make_target):
    """Compared by content (token/id pairs, added tokens), not file bytes: a re-serialised copy is the same."""
    target, drafter = make_target(8), make_drafter()
    write_tokenizer(target / "tokenizer.json", 250, added=("<s>",))
    data = json.loads((target / "tokenizer.json").read_text())
    (drafter / "tokenizer.json").write_text(json.dumps(data, indent=4, sort_keys=True))
    assert (drafter / "tokenizer.json").read_bytes() != (target / "tokenizer.json").read_bytes()
    assert pairing(drafter, target) == []


def test_unreadable_tokenizer_is_skipped(make_drafter, make_target):
    target = make_target(8)
    (target / "tokenizer.json").write_text("{not json")
    assert pairing(make_drafter(), target) == []


# --- F25: chat template ----------------------------------------------------------------------------


def _recorded(drafter: Path, template: str) -> Path:
    write_json(drafter / "training.json", {"optimizer_steps": 10, "chat_template_sha256": sha(template)})
    return drafter


def test_changed_template_file(make_drafter, make_target):
    target = make_target(8)
    (target / "chat_template.jinja").write_text(TEMPLATE + "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    drafter = _recorded(make_drafter(), TEMPLATE)
    assert pairing(drafter, target) == [("W-TEMPLATE-CHANGED", "chat_template")]
    msg = messages(drafter, target, "W-TEMPLATE-CHANGED")[0]
    assert sha(TEMPLATE)[:12] in msg and "(training.json)" in msg and "(chat_template.jinja)" in msg


def test_changed_template_in_tokenizer_config_recorded_in_provenance(make_drafter, make_target, tmp_path):
    """The record in eaglehub.json (a converted drafter), the template in tokenizer_config.json."""
    converted = tmp_path / "converted"
    convert(make_drafter(), converted, fmt="vllm")
    prov = json.loads((converted / "eaglehub.json").read_text())
    write_json(converted / "eaglehub.json", {**prov, "chat_template_sha256": sha(TEMPLATE)})
    target = make_target(8)
    write_json(target / "tokenizer_config.json", {"chat_template": TEMPLATE.replace("<|", "[")})
    assert pairing(converted, target) == [("W-TEMPLATE-CHANGED", "chat_template")]
    assert "(eaglehub.json)" in messages(converted, target, "W-TEMPLATE-CHANGED")[0]
    write_json(
        target / "tokenizer_config.json",
        {"chat_template": [{"name": "default", "template": TEMPLATE}, {"name": "tool_use", "template": "x"}]},
    )
    assert pairing(converted, target) == []  # the named-template form: "default" is the one applied


def test_template_removed_from_target(make_drafter, make_target):
    drafter = _recorded(make_drafter(), TEMPLATE)
    assert pairing(drafter, make_target(8)) == [("W-TEMPLATE-CHANGED", "chat_template")]


def test_template_file_wins_over_tokenizer_config(make_drafter, make_target):
    """As in transformers: chat_template.jinja is applied, tokenizer_config.json's template ignored."""
    target = make_target(8)
    (target / "chat_template.jinja").write_text(TEMPLATE)
    write_json(target / "tokenizer_config.json", {"chat_template": "something else"})
    assert pairing(_recorded(make_drafter(), TEMPLATE), target) == []
    assert pairing(make_drafter("no-record"), target) == []  # nothing recorded: nothing to compare


@pytest.mark.real
def test_fixture_records_the_real_targets_template():
    """fixtures/smollm2-eagle3 was trained on prompts rendered with SmolLM2's own template (gen_data.py)."""
    from eaglehub.target import resolve_target

    resolve_target("smollm2")  # builds the target once if `make test` has not
    target = read_target("smollm2")
    fixture = Path(__file__).resolve().parent.parent / "fixtures" / "smollm2-eagle3"
    recorded = json.loads((fixture / "training.json").read_text())["chat_template_sha256"]
    template, where = target.chat_template()
    assert where == "chat_template.jinja" and sha(template) == recorded
    report = validate(fixture, "smollm2", deep=True)
    assert report["counts"]["error"] == 0
    assert [f["code"] for f in report["findings"] if f["code"] in PAIRING] == []


# --- F19: quantized target -------------------------------------------------------------------------


def test_quantized_target_unquantized_drafter(make_drafter, make_target):
    target = make_target(8, quantization_config={"quant_method": "fp8", "activation_scheme": "dynamic"})
    assert pairing(make_drafter(), target) == [("I-QUANT-PAIRING", "target quantization_config")]
    assert "(fp8)" in messages(make_drafter("d2"), target, "I-QUANT-PAIRING")[0]


def test_modelopt_quantized_target(make_drafter, make_target):
    target = make_target(8)
    write_json(
        target / "hf_quant_config.json",
        {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4"}},
    )
    assert pairing(make_drafter(), target) == [("I-QUANT-PAIRING", "target hf_quant_config.json")]
    assert "(modelopt NVFP4)" in messages(make_drafter("d2"), target, "I-QUANT-PAIRING")[0]


def test_quantized_drafter_or_unquantized_target(make_drafter, make_target):
    """A drafter with its own quantization_config is a quantized pair (its own checks judge it)."""
    qc = {"quant_method": "fp8", "activation_scheme": "dynamic"}
    assert (
        pairing(
            make_drafter("q", mutate=setk("quantization_config", qc)),
            make_target(8, name="qt", quantization_config=qc),
        )
        == []
    )
    assert pairing(make_drafter("plain"), make_target(8, name="plain-t")) == []


# --- F12: non-default aux ids ----------------------------------------------------------------------


def test_aux_ids_other_than_the_default(make_drafter, make_target):
    drafter = make_drafter(mutate=setk(AUX, [3, 5, 7]))
    assert pairing(drafter, make_target(8)) == [("W-AUX-NONDEFAULT", AUX)]
    assert "[2, 4, 5] of this 8-layer target" in messages(drafter, make_target(8), "W-AUX-NONDEFAULT")[0]


def test_default_of_another_target_is_not_this_ones(make_drafter, make_target):
    """D's [2, 4, 5] is the default for 8 layers, not for 10 ((2, 5, 7))."""
    assert pairing(make_drafter(), make_target(10)) == [("W-AUX-NONDEFAULT", AUX)]


def test_nested_c_out_ids_are_compared_as_c_in(make_drafter, make_target):
    """SpecForge-style nested C-out [1, 3, 4] captures C-in [2, 4, 5], the 8-layer default: no warning;
    nested [1, 4, 6] (C-in [2, 5, 7]) is not the default."""

    def nested(ids):
        def mutate(cfg, t):
            cfg.pop(AUX)
            cfg.pop("num_aux_hidden_states")
            cfg["eagle_config"] = {AUX: ids}

        return mutate

    target = make_target(8)
    # the runners that capture the nested list: vLLM's V1 runner and SGLang
    both = Options(profiles=("vllm-0.32-cpu", "sglang-0.5.23"))
    assert pairing(make_drafter("default", mutate=nested([1, 3, 4])), target, options=both) == []
    other = make_drafter("other", mutate=nested([1, 4, 6]))
    assert pairing(other, target, options=both) == [("W-AUX-NONDEFAULT", f"eagle_config.{AUX}")]
    # Model Runner V2 never reads the nested list: "this runner captures the drafter's ids" does not hold there
    # (E-AUX-IGNORED says it captures the default layers instead), so the finding leaves it out and says so
    report = validate(other, target, options=Options(profiles=("vllm-0.33-gpu", "sglang-0.5.23")))
    (f,) = [f for f in report["findings"] if f["code"] == "W-AUX-NONDEFAULT"]
    assert f["profiles"] == ["sglang-0.5.23"]
    assert f["message"].startswith("SGLang 0.5.23: ") and f["message"].endswith(
        "(not on vLLM 0.33.0 on GPU (Model Runner V2))"
    )
    assert [g["profiles"] for g in report["findings"] if g["code"] == "E-AUX-IGNORED"] == [["vllm-0.33-gpu"]]
    assert pairing(other, target) == []  # the default profile alone: only E-AUX-IGNORED


def test_no_nondefault_warning_without_ids_target_or_with_broken_ids(make_drafter, make_target):
    assert pairing(make_drafter("none", mutate=lambda cfg, t: cfg.pop(AUX)), make_target(8)) == []
    assert pairing(make_drafter("no-target", mutate=setk(AUX, [3, 5, 7])), None) == []
    report = validate(make_drafter("range", mutate=setk(AUX, [3, 5, 9])), make_target(8))  # 9 > N: E-AUX-RANGE only
    assert [f["code"] for f in report["findings"]] == ["E-AUX-RANGE"]


def test_real_fixture_ids_are_the_default():
    """The committed drafter's [2, 15, 27] is (2, 30//2, 30-3) of the 30-layer SmolLM2."""
    from eaglehub.drafter.canonical import default_aux_ids

    fixture = Path(__file__).resolve().parent.parent / "fixtures" / "smollm2-eagle3"
    assert json.loads((fixture / "config.json").read_text())[AUX] == default_aux_ids(30)


# --- embedding comparison without target weights --------------------------------------------------


def test_embedding_without_target_weights_is_skipped(make_drafter, make_target):
    """The drafter ships embed_tokens; the target has only config.json: no comparison, no finding, no crash."""
    drafter = make_drafter(
        mutate=lambda cfg, t: t.__setitem__("embed_tokens.weight", (torch.randn(V, 64) * 0.05).to(torch.bfloat16))
    )
    target = make_target(8)
    assert read_target(target).index() is None
    assert validate(drafter, target)["findings"] == []
    assert pairing(drafter, make_target(8, weights=True, name="with-weights")) == [
        ("I-EMBED-TRAINED", "embed_tokens.weight")
    ]


# --- a hub-id target from the Hugging Face cache, without weights ----------------------------------


def _hub_target(tmp_path: Path, make_target) -> tuple[Path, Path]:
    src = make_target(8, name="hub-src", bos_token_id=1, eos_token_id=2)
    write_tokenizer(src / "tokenizer.json", 300)
    (src / "chat_template.jinja").write_text(TEMPLATE)
    write_json(src / "tokenizer_config.json", {"tokenizer_class": "PreTrainedTokenizerFast"})
    write_json(src / "generation_config.json", {"eos_token_id": [2, 3]})
    cache = tmp_path / "hub"
    make_hub_cache(cache, "tiny-org/tiny-target", src)
    return cache, src


def test_hub_target_reads_config_and_side_files_only(make_drafter, make_target, tmp_path, monkeypatch):
    import huggingface_hub
    import huggingface_hub.constants as hf_constants

    cache, _ = _hub_target(tmp_path, make_target)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)
    asked = []
    real = huggingface_hub.hf_hub_download

    def spy(repo_id, filename, **kw):
        asked.append(filename)
        return real(repo_id, filename, **kw)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", spy)
    before = tree_state(cache)

    info = read_target("tiny-org/tiny-target")
    assert info.path.parent.name == "snapshots" and info.layers == 8 and info.index() is None
    assert set(info.files) == {
        "tokenizer.json",
        "chat_template.jinja",
        "tokenizer_config.json",
        "generation_config.json",
    }
    assert set(asked) == {"config.json", *TARGET_SIDE_FILES}  # asked for each, weights never

    drafter = make_drafter(
        mutate=lambda cfg, t: (
            cfg.update(eos_token_id=5),
            t.__setitem__("embed_tokens.weight", (torch.randn(V, 64) * 0.05).to(torch.bfloat16)),
        )
    )
    write_json(drafter / "training.json", {"chat_template_sha256": sha(TEMPLATE + "changed")})
    asked.clear()
    assert pairing(drafter, "tiny-org/tiny-target") == [
        ("I-TOKENS-SPECIAL", "eos_token_id"),
        ("E-TOKENIZER-SIZE", "vocab_size"),
        ("W-TEMPLATE-CHANGED", "chat_template"),
    ]
    assert not [f for f in asked if f.endswith((".safetensors", ".bin", ".index.json"))]
    res = CliRunner().invoke(
        main, ["validate", str(make_drafter("clean")), "--target", "tiny-org/tiny-target", "--json"]
    )
    report = json.loads(res.output)
    assert res.exit_code == 1 and [f["code"] for f in report["findings"]] == ["E-TOKENIZER-SIZE"]  # 300 tokens > 256
    assert report["target"] == str(info.path)
    assert tree_state(cache) == before


def test_pairing_checks_do_not_import_torch(make_drafter, make_target):
    """The tokenizer and template checks read tokenizer.json with the tokenizers library only."""
    drafter = make_drafter(mutate=lambda cfg, t: cfg.update(eos_token_id=9))
    target = make_target(8, eos_token_id=2, architectures=["Qwen3ForCausalLM"])
    write_tokenizer(target / "tokenizer.json", V)
    write_tokenizer(drafter / "tokenizer.json", V, rename={3: "x"})
    (target / "chat_template.jinja").write_text(TEMPLATE)
    write_json(drafter / "training.json", {"chat_template_sha256": sha("old")})
    result = run_light([["validate", str(drafter), "--target", str(target), "--json"]])
    assert result["codes"] == [0]  # warnings only
    _assert_light(result)
