"""Turn evaluation prompts into the exact token ids every engine run receives.

The target's own chat template is applied with ``add_generation_prompt=True`` (a single user turn;
whatever default system prompt the template adds is kept), then the text is tokenized without
adding special tokens again. Doing this once, outside the engines, guarantees that the target-alone
run and every target + drafter run see identical inputs (benchmarks.md §4, pitfall 4).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import EaglehubError


def encode_chat(target: Path, user_messages: list[str]) -> list[list[int]]:
    """Token ids of each message rendered as a single-turn chat for ``target``.

    Raises:
        EaglehubError: the target has no tokenizer or no chat template.
    """
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(target))
    except (OSError, ValueError) as exc:
        raise EaglehubError(f"cannot load the tokenizer of target {target}: {exc}",
                            hint="the target directory needs tokenizer files") from exc
    if not getattr(tok, "chat_template", None):
        raise EaglehubError(f"target {target} has no chat template",
                            hint="verify needs an instruction-tuned target with a chat template")
    ids = []
    for msg in user_messages:
        text = tok.apply_chat_template([{"role": "user", "content": msg}], tokenize=False, add_generation_prompt=True)
        ids.append(list(tok(text, add_special_tokens=False)["input_ids"]))
    return ids
