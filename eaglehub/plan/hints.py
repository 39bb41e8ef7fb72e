"""The ``eaglehub verify --dry-run`` lines a refused plan's hint proposes: the user's own options on another
machine, layout or context, so that the hint is a command that runs."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from eaglehub.plan.cards import GIB


@dataclass(frozen=True)
class HintInputs:
    """``target``: as given; ``options``: the dry run's other options (drafter, k, output tokens, sequences,
    profile), without ``--context``; ``context``: the ``--context`` planned (None: none given); ``extra``: the
    tokens ``max_model_len`` adds to it (output, and the drafter's k)."""

    target: str
    options: str = ""
    context: int | None = None
    extra: int = 0

    def line(self, machine, layout: str = "", context: int | None = None) -> str:
        """The dry run on ``machine`` (a :class:`eaglehub.plan.sizing.Machine`) with ``layout`` options and
        ``context`` (default: the one planned)."""
        context = context if context is not None else self.context
        nodes = f" --nodes {machine.nodes}" if machine.nodes > 1 else ""
        memory = machine.card or f"{machine.total_bytes / GIB:.2f}GiB"
        return (
            f"eaglehub verify --target {shlex.quote(self.target)} --dry-run --gpus {machine.gpus} "
            f"--gpu-memory {memory}{nodes}{self.options}" + (f" --context {context}" if context else "") + layout
        )
