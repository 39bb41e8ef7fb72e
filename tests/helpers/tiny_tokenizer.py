"""A tiny fast BPE tokenizer with a chat template, for a tiny target that must pad prompts to exact
token counts (diagnose --contexts, verify --context)."""

from __future__ import annotations

import functools
import json

from eaglehub.measure.padding import padding_text

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@functools.cache
def _tiny_tokenizer_json() -> str:
    """A byte-free BPE (Metaspace words, 240 ids: fits the tiny target's 256-token vocabulary) trained on
    the padding text itself, so it merges real subwords and its cuts are not one per character."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(
        vocab_size=240, special_tokens=["[UNK]", "<|im_start|>", "<|im_end|>"], limit_alphabet=100
    )
    tok.train_from_iterator([padding_text(), "user assistant Question: question m1 m2 c1 c2\n"], trainer)
    return tok.to_str()


def add_tokenizer(target):
    (target / "tokenizer.json").write_text(_tiny_tokenizer_json())
    (target / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": "<|im_start|>",
                "eos_token": "<|im_end|>",
                "unk_token": "[UNK]",
                "chat_template": CHAT_TEMPLATE,
            }
        )
    )
    return target
