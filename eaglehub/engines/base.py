"""Engine-neutral interface for running a target alone or a target + EAGLE-3 drafter.

An engine takes *token ids* (the chat template is applied once, by the caller, with the target's
tokenizer — see :mod:`eaglehub.engines.chat`) so that every engine and every run sees identical
inputs. It decodes greedily and returns, per prompt, the output token ids, plus the speculative
decoding counters of each prompt group (vLLM's ``get_metrics()`` counters, docs/vllm.md §9: ``num_drafts``, ``num_draft_tokens``, ``num_accepted_tokens``, ``accepted_per_pos[k]``).

Implementations: :mod:`eaglehub.engines.vllm_engine` (vLLM) and :mod:`eaglehub.engines.reference`
(the embedded PyTorch + transformers reference engine).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class SpecCounters:
    """Cumulative speculative-decoding counters (docs/vllm.md §9).

    Per request and verify step the engine adds 1 to ``num_drafts``, the number of drafted tokens
    (k) to ``num_draft_tokens``, the number of accepted draft tokens (generated − 1, the bonus token
    is not counted) to ``num_accepted_tokens``, and 1 to ``accepted_per_pos[i]`` for every
    ``i < accepted``. All values are token or step counts (dimensionless integers).

    ``accepted_histogram[j]``: verify steps that accepted exactly j draft tokens (j = 0..k, the bonus
    token not counted; vLLM's per-request ``acceptance_histogram``), where the engine counts it; empty
    otherwise (vLLM's aggregate counters do not). When present, ``accepted_per_pos[i]`` is the sum of
    ``accepted_histogram[j]`` over j > i.
    """

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_pos: tuple[int, ...] = ()
    accepted_histogram: tuple[int, ...] = ()

    def __add__(self, other: SpecCounters) -> SpecCounters:
        return SpecCounters(
            self.num_drafts + other.num_drafts,
            self.num_draft_tokens + other.num_draft_tokens,
            self.num_accepted_tokens + other.num_accepted_tokens,
            _zip_pad(self.accepted_per_pos, other.accepted_per_pos, 1),
            _zip_pad(self.accepted_histogram, other.accepted_histogram, 1),
        )

    def __sub__(self, other: SpecCounters) -> SpecCounters:
        """Difference of two cumulative readings (later − earlier)."""
        return SpecCounters(
            self.num_drafts - other.num_drafts,
            self.num_draft_tokens - other.num_draft_tokens,
            self.num_accepted_tokens - other.num_accepted_tokens,
            _zip_pad(self.accepted_per_pos, other.accepted_per_pos, -1),
            _zip_pad(self.accepted_histogram, other.accepted_histogram, -1),
        )

    def to_dict(self) -> dict:
        d = asdict(self)
        d["accepted_per_pos"] = list(self.accepted_per_pos)
        if self.accepted_histogram:  # absent where the engine does not count it
            d["accepted_histogram"] = list(self.accepted_histogram)
        else:
            del d["accepted_histogram"]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> SpecCounters:
        return cls(
            int(d["num_drafts"]),
            int(d["num_draft_tokens"]),
            int(d["num_accepted_tokens"]),
            tuple(int(x) for x in d["accepted_per_pos"]),
            tuple(int(x) for x in d.get("accepted_histogram", ())),
        )


def _zip_pad(a: tuple[int, ...], b: tuple[int, ...], sign: int) -> tuple[int, ...]:
    n = max(len(a), len(b))
    a = tuple(a) + (0,) * (n - len(a))
    b = tuple(b) + (0,) * (n - len(b))
    return tuple(x + sign * y for x, y in zip(a, b))


@dataclass(frozen=True)
class RunSpec:
    """What to run: the target directory, optionally an EAGLE-3 drafter, and decoding settings.

    ``k`` is ``num_speculative_tokens``; ``max_tokens`` caps the output tokens per prompt;
    ``dtype`` is the engine's compute dtype; ``seed`` is the engine seed (greedy decoding does not
    depend on it, it is fixed anyway so runs are comparable); ``temperature`` 0 is greedy; at
    temperature > 0, ``top_p`` (1: off) and ``top_k`` (0: off) filter the target's distribution as
    vLLM's sampler does (top-k first, then the smallest set of tokens with probability ≥ top_p).
    ``engine_options``: engine pass-through settings (vLLM: ``tensor_parallel_size``,
    ``pipeline_parallel_size``, ``distributed_executor_backend``, ``max_num_seqs`` = concurrency);
    an engine ignores the keys it has no use for. ``diagnostics``: the reference engine also
    records per draft depth the drafter's hidden-state norm and attention mass on the first tokens
    (:attr:`RunResult.diagnostics`).
    """

    target: Path
    drafter: Path | None = None
    k: int = 3
    max_tokens: int = 64
    dtype: str = "float32"
    seed: int = 0
    max_model_len: int = 2048
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    engine_options: dict = field(default_factory=dict)
    diagnostics: bool = False
    distinct_seeds: bool = False
    """At temperature > 0: repeated prompts must draw independent samples (vLLM: no per-request seed,
    the engine's generator seeded once at start-up draws them all; the reference engine always does)."""
    one_batch: bool = False
    """vLLM: every prompt in one ``generate`` call, so up to ``max_num_seqs`` run at once across categories
    (``verify --concurrency``); each category's counters are then the sum of its requests' own counters."""


@dataclass
class RunResult:
    """What a run produced.

    Attributes:
        outputs: per prompt (input order), the generated token ids.
        group_counters: per prompt group (category), the counters accumulated while that group ran;
            empty for a target-alone run.
        generate_seconds: wall time spent generating (s), excluding model loading.
        group_seconds: per prompt group, the wall time of its batch (s; they sum to
            ``generate_seconds``), where the engine times each batch; empty otherwise.
        engine_config: what the engine says it ran with (vLLM: prefix caching, chunked prefill, the token
            budget, max_num_seqs, the k schedule, read from its own config) and what it counted across the
            whole run (prefix-cache hit tokens per request; with ``one_batch`` the aggregate counters);
            ``None`` where the engine does not say.
        load_seconds: wall time to start the engine and load the weights (s).
        engine: engine name (e.g. ``vllm``); ``engine_version``: its version string.
        prompt_counters: per prompt (input order), its own counters with ``accepted_histogram``, where
            the engine counts per request (the reference engine; vLLM with a drafter, from its
            per-request spec-decode metrics); ``None`` otherwise (a target-alone run).
        diagnostics: with :attr:`RunSpec.diagnostics`, per draft depth d = 0..k−1 (lists of length
            k): ``hidden_state_norm`` (mean L2 norm of the drafter state that produced draft d),
            ``sink_attention_mass`` (mean attention probability on the first ``sink_tokens``
            positions, over heads and layers), ``samples`` (draft steps averaged); ``None`` otherwise.
    """

    outputs: list[list[int]]
    group_counters: dict[str, SpecCounters] = field(default_factory=dict)
    generate_seconds: float = 0.0
    load_seconds: float = 0.0
    engine: str = ""
    engine_version: str = ""
    prompt_counters: list[SpecCounters] | None = None
    diagnostics: dict | None = None
    group_seconds: dict[str, float] = field(default_factory=dict)
    engine_config: dict | None = None

    @property
    def num_output_tokens(self) -> int:
        return sum(len(o) for o in self.outputs)

    @property
    def output_tokens_per_second(self) -> float:
        """Output tokens per second of generation wall time (0 when nothing was timed)."""
        return self.num_output_tokens / self.generate_seconds if self.generate_seconds > 0 else 0.0

    def to_dict(self) -> dict:
        return {
            "outputs": self.outputs,
            "group_counters": {g: c.to_dict() for g, c in self.group_counters.items()},
            "generate_seconds": self.generate_seconds,
            "load_seconds": self.load_seconds,
            "engine": self.engine,
            "engine_version": self.engine_version,
            "prompt_counters": None if self.prompt_counters is None else [c.to_dict() for c in self.prompt_counters],
            "diagnostics": self.diagnostics,
            "group_seconds": self.group_seconds,
            "engine_config": self.engine_config,
        }

    @classmethod
    def from_dict(cls, d: dict) -> RunResult:
        return cls(
            outputs=[list(map(int, o)) for o in d["outputs"]],
            group_counters={g: SpecCounters.from_dict(c) for g, c in d["group_counters"].items()},
            generate_seconds=float(d["generate_seconds"]),
            load_seconds=float(d["load_seconds"]),
            engine=d["engine"],
            engine_version=d["engine_version"],
            prompt_counters=None
            if d.get("prompt_counters") is None
            else [SpecCounters.from_dict(c) for c in d["prompt_counters"]],
            diagnostics=d.get("diagnostics"),
            group_seconds={g: float(s) for g, s in (d.get("group_seconds") or {}).items()},
            engine_config=d.get("engine_config"),
        )


ProgressFn = Callable[[str, int], None]
"""Progress callback: ``(group, number_of_prompts_finished_in_that_step)``."""


@runtime_checkable
class Engine(Protocol):
    """A decoding engine that can run a target with or without an EAGLE-3 drafter."""

    name: str

    def version(self) -> str:
        """The engine's version string.

        Raises:
            EaglehubError: the engine is not installed (exit code 2, with an install hint).
        """
        ...

    def run(
        self,
        spec: RunSpec,
        prompt_token_ids: list[list[int]],
        groups: list[str],
        progress: ProgressFn | None = None,
    ) -> RunResult:
        """Greedily decode every prompt (token ids, chat template already applied).

        Prompts sharing a ``groups`` label are decoded together as one batch and the counters are
        read between batches, so :attr:`RunResult.group_counters` is per group. Both the
        target-alone run and the drafter run use the same batches, so batch composition cannot
        differ between them.

        Raises:
            EaglehubError: the engine is missing or the run failed (message names the cause).
        """
        ...
