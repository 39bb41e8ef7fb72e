"""Requests an engine runs: one per prompt turn, multi-turn conversations replayed turn by turn."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eaglehub.engines.base import RunResult, SpecCounters
from eaglehub.measure.prompts import Prompt

MULTI_TURN_DEFINITION = (
    "a request is one (prompt, user turn): id = the prompt id for turn 1, <prompt id>#<n> for turn n; the input of "
    "turn n + 1 holds the assistant reply of turn n = the primary engine's target-alone output for turn n, decoded with "
    "special tokens skipped, so every run of every engine receives the same token ids; a drafter run's own outputs are "
    "only compared with the target's, never fed back"
)


@dataclass(frozen=True)
class Request:
    """One engine request: user turn ``turn`` (1-based) of ``prompt``, after the replies to the
    turns before it (:data:`MULTI_TURN_DEFINITION`).

    ``id``: the prompt id for turn 1, ``<prompt id>#<turn>`` after (prompt ids never hold ``#``,
    ``schemas/prompts*.schema.json``, so request ids are unique); ``category``: the prompt's (its
    batch and counter group)."""

    prompt: Prompt
    turn: int = 1

    @property
    def id(self) -> str:
        return self.prompt.id if self.turn == 1 else f"{self.prompt.id}#{self.turn}"

    @property
    def category(self) -> str:
        return self.prompt.category


def requests_of(prompts: list[Prompt]) -> list[Request]:
    """Every (prompt, turn) in conversation order: p1 turn 1, p1 turn 2, …, p2 turn 1, … (one per
    prompt for single-turn sets, so request ids are the prompt ids)."""
    return [Request(p, n) for p in prompts for n in range(1, len(p.turns) + 1)]


def merge_runs(phases: list[tuple[list[int], RunResult]], n: int) -> RunResult:
    """One run of ``n`` requests from runs over disjoint parts of them (the turns of a baseline).

    ``phases``: ``(request indices, run)`` pairs that cover 0..n−1 once. Outputs, and per-request
    counters where every phase has them, go to their indices; seconds and counters are summed (per
    group for group counters and group seconds); engine name and version are the first phase's;
    ``diagnostics`` is dropped (per-phase means). A single phase is returned as it is.

    Raises:
        ValueError: the indices do not cover 0..n−1 exactly once (a caller's bug).
    """
    if sorted(i for index, _ in phases for i in index) != list(range(n)):
        raise ValueError(f"phases must cover requests 0..{n - 1} once each")
    if len(phases) == 1:
        return phases[0][1]
    outputs: list = [None] * n
    counters: list = [None] * n
    group_counters: dict[str, SpecCounters] = {}
    group_seconds: dict[str, float] = {}
    for index, run in phases:
        for i, out in zip(index, run.outputs):
            outputs[i] = out
        for i, c in zip(index, run.prompt_counters or ()):
            counters[i] = c
        for g, c in run.group_counters.items():
            group_counters[g] = group_counters[g] + c if g in group_counters else c
        for g, sec in run.group_seconds.items():
            group_seconds[g] = group_seconds.get(g, 0.0) + sec
    first = phases[0][1]
    return RunResult(
        outputs=outputs,
        group_counters=group_counters,
        generate_seconds=sum(r.generate_seconds for _, r in phases),
        load_seconds=sum(r.load_seconds for _, r in phases),
        engine=first.engine,
        engine_version=first.engine_version,
        prompt_counters=counters if all(r.prompt_counters is not None for _, r in phases) else None,
        group_seconds=group_seconds,
    )


def run_by_turn(run, requests: list[Request], encode, decode) -> tuple[RunResult, list[list[int]]]:
    """The target-alone baseline turn by turn, and the input token ids of every request.

    ``run(ids, groups, turn) -> RunResult`` runs one phase: the requests of user turn ``turn``, in
    request order, grouped by category. ``encode([(turns, replies)]) -> [ids]`` renders and
    tokenizes (:meth:`~eaglehub.engines.chat.ChatTokenizer.encode_turn`); ``decode(output ids) ->
    str`` (:meth:`~eaglehub.engines.chat.ChatTokenizer.decode`; only called when a later turn exists).
    The reply before turn n + 1 is the same prompt's phase-n output decoded (the rule of
    :mod:`eaglehub.engines.chat`).

    Returns:
        ``(baseline, ids)``: the phases merged (:func:`merge_runs`) and one id list per request,
        both in request order.

    Raises:
        EaglehubError: as ``run`` and ``encode`` raise.
    """
    ids: list = [None] * len(requests)
    replies: dict[str, list[str]] = {r.prompt.id: [] for r in requests}
    phases = []
    for turn in range(1, max(r.turn for r in requests) + 1):
        index = [i for i, r in enumerate(requests) if r.turn == turn]
        batch = encode([(requests[i].prompt.turns[:turn], replies[requests[i].prompt.id]) for i in index])
        result = run(batch, [requests[i].category for i in index], turn)
        for i, x, out in zip(index, batch, result.outputs):
            ids[i] = x
            if turn < len(requests[i].prompt.turns):
                replies[requests[i].prompt.id].append(decode(out))
        phases.append((index, result))
    return merge_runs(phases, len(requests)), ids


def chat_codec(target: Path, prompts: list[Prompt], template_kwargs: dict | None = None):
    """``(encode, decode)`` for :func:`run_by_turn`. Single-turn sets without template variables go
    through :func:`~eaglehub.engines.chat.encode_chat` as before multi-turn support; multi-turn sets
    and ``template_kwargs`` (``chat_template_kwargs``) load one
    :class:`~eaglehub.engines.chat.ChatTokenizer` and render the longest chat once with empty
    replies, so a template that refuses multi-turn chats or these variables fails before any engine work."""
    from eaglehub.engines import chat

    if all(len(p.turns) == 1 for p in prompts) and not template_kwargs:
        return (lambda convs: chat.encode_chat(target, [turns[0] for turns, _ in convs])), None
    tok = chat.ChatTokenizer(target, template_kwargs)
    longest = max(prompts, key=lambda p: len(p.turns))
    tok.render(longest.turns, [""] * (len(longest.turns) - 1))
    return (lambda convs: [tok.encode_turn(turns, replies) for turns, replies in convs]), tok.decode
