"""Turn evaluation prompts into the exact token ids every engine run receives.

Rendering (:meth:`ChatTokenizer.render`): with a chat template, the target's own template is
applied with ``add_generation_prompt=True`` to the user turns so far, interleaved with the
assistant replies to all but the last (whatever default system prompt the template adds is kept),
and the text is tokenized without adding special tokens again (the template writes them). A target
without a chat template (a base model) gets the raw text instead: the turns and replies joined with
``"\\n\\n"`` (a single turn is the message itself), tokenized as vLLM tokenizes a text prompt, i.e.
with the tokenizer's own special tokens (a BOS where it adds one).

Template variables (``chat_template_kwargs``, e.g. ``{"enable_thinking": false}``) are passed to
``apply_chat_template`` as vLLM's and SGLang's servers pass a request's ``chat_template_kwargs``; a
target without a chat template has nothing to pass them to, and they are ignored.

Doing this once, outside the engines, guarantees that the target-alone run and every target +
drafter run see identical inputs (docs/verification.md §4, pitfall 4). Multi-turn prompts (MT-Bench) keep
that guarantee by this rule: the assistant reply of turn n in the input of turn n + 1 is the
**target-alone run's** greedy output for turn n, decoded with :func:`decode` (special tokens
skipped, so EOS and end-of-turn markers are dropped and the template writes its own), as it is,
capped at ``max_tokens``. Every engine run then receives the same ids for turn n + 1, whatever the
drafter did; a drafter run's own turn-n output is only compared with the target's, never fed back.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import cast

from eaglehub.errors import EaglehubError

TURN_SEPARATOR = "\n\n"


class ChatTokenizer:
    """The tokenizer of ``target``, loaded once (it takes seconds), for rendering and decoding.

    Raises:
        EaglehubError: the target has no loadable tokenizer.
    """

    def __init__(self, target: Path, template_kwargs: dict | None = None):
        from transformers import AutoTokenizer

        self.target = Path(target)
        self.template_kwargs = dict(template_kwargs or {})
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(target))
        except (OSError, ValueError) as exc:
            raise EaglehubError(
                f"cannot load the tokenizer of target {target}: {' '.join(str(exc).split())}",
                hint="the target directory needs tokenizer files",
            ) from exc

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))

    def render(self, turns: Sequence[str], replies: Sequence[str] = ()) -> str:
        """The text of user ``turns`` [0, n) with assistant ``replies`` [0, n - 1) (module docstring).

        Raises:
            ValueError: ``turns`` is empty or ``len(replies) != len(turns) - 1`` (a caller's bug).
            EaglehubError: the chat template fails to render (e.g. it refuses these roles).
        """
        if not turns or len(replies) != len(turns) - 1:
            raise ValueError(
                f"need n >= 1 user turns and n - 1 replies, got {len(turns)} turns and {len(replies)} replies"
            )
        if not self.has_chat_template:
            parts = [turns[0]]
            for reply, turn in zip(replies, turns[1:]):
                parts += [reply, turn]
            return TURN_SEPARATOR.join(parts)
        from jinja2 import TemplateError

        messages = [{"role": "user", "content": turns[0]}]
        for reply, turn in zip(replies, turns[1:]):
            messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": turn}]
        try:
            text = self.tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True, **self.template_kwargs
            )
            return cast(str, text)  # tokenize=False: the rendered string
        except TemplateError as exc:
            raise EaglehubError(
                f"the chat template of target {self.target} fails on a {len(turns)}-turn chat: "
                f"{' '.join(str(exc).split())}",
                hint="check the target's chat template",
            ) from exc

    def encode_turn(self, turns: Sequence[str], replies: Sequence[str] = ()) -> list[int]:
        """Token ids of :meth:`render` ``(turns, replies)``: the input of user turn ``len(turns) - 1``.

        Raises: as :meth:`render`.
        """
        text = self.render(turns, replies)
        # the template writes BOS and turn markers itself; raw text gets what a text prompt gets in vLLM
        return list(self.tokenizer(text, add_special_tokens=not self.has_chat_template)["input_ids"])

    def decode(self, ids: Sequence[int]) -> str:
        """Text of output token ids, special tokens skipped (the reply fed back as an assistant turn)."""
        return cast(str, self.tokenizer.decode(list(ids), skip_special_tokens=True))  # one sequence: one string


def encode_turn(target: Path, turns: list[str], replies: list[str]) -> list[int]:
    """Token ids of user ``turns`` (n >= 1) with assistant ``replies`` (n - 1) for ``target``.

    Raises:
        ValueError: ``len(replies) != len(turns) - 1`` or no turns.
        EaglehubError: no loadable tokenizer, or the chat template fails.
    """
    return ChatTokenizer(target).encode_turn(turns, replies)


def encode_turns(target: Path, conversations: Sequence[tuple[Sequence[str], Sequence[str]]]) -> list[list[int]]:
    """:func:`encode_turn` for each ``(turns, replies)`` pair, with one tokenizer load.

    Returns one id list per conversation, in order. Raises: as :func:`encode_turn`.
    """
    tok = ChatTokenizer(target)
    return [tok.encode_turn(turns, replies) for turns, replies in conversations]


def encode_chat(target: Path, user_messages: list[str]) -> list[list[int]]:
    """Token ids of each message rendered as a single-turn chat for ``target`` (raw text when the
    target has no chat template).

    Raises:
        EaglehubError: the target has no loadable tokenizer, or the chat template fails.
    """
    return encode_turns(target, [([msg], []) for msg in user_messages])


def decode(target: Path, ids: Sequence[int]) -> str:
    """Text of one output's token ids, special tokens skipped. Raises: EaglehubError (no tokenizer)."""
    return ChatTokenizer(target).decode(ids)


def decode_batch(target: Path, outputs: Sequence[Sequence[int]]) -> list[str]:
    """:func:`decode` of each output, with one tokenizer load. Raises: EaglehubError (no tokenizer)."""
    tok = ChatTokenizer(target)
    return [tok.decode(ids) for ids in outputs]
