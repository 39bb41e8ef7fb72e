"""Engine-neutral interface for running a target alone or a target + EAGLE-3 drafter.

An engine takes *token ids* (the chat template is applied once, by the caller, with the target's
tokenizer — see :mod:`eaglehub.engines.chat`) so that every engine and every run sees identical
inputs. It decodes greedily and returns, per prompt, the output token ids, plus the speculative
decoding counters of each prompt group (vLLM's ``get_metrics()`` counters, shared/reference/vllm.md
§9: ``num_drafts``, ``num_draft_tokens``, ``num_accepted_tokens``, ``accepted_per_pos[k]``).

Implementations: :mod:`eaglehub.engines.vllm_engine` (vLLM); a PyTorch reference engine can be
added behind the same :class:`Engine` protocol.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Protocol, runtime_checkable


@dataclass(frozen=True)
class SpecCounters:
    """Cumulative speculative-decoding counters (vllm.md §9).

    Per request and verify step the engine adds 1 to ``num_drafts``, the number of drafted tokens
    (k) to ``num_draft_tokens``, the number of accepted draft tokens (generated − 1, the bonus token
    is not counted) to ``num_accepted_tokens``, and 1 to ``accepted_per_pos[i]`` for every
    ``i < accepted``. All values are token or step counts (dimensionless integers).
    """

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_pos: tuple[int, ...] = ()

    def __add__(self, other: SpecCounters) -> SpecCounters:
        return SpecCounters(
            self.num_drafts + other.num_drafts,
            self.num_draft_tokens + other.num_draft_tokens,
            self.num_accepted_tokens + other.num_accepted_tokens,
            _zip_pad(self.accepted_per_pos, other.accepted_per_pos, 1),
        )

    def __sub__(self, other: SpecCounters) -> SpecCounters:
        """Difference of two cumulative readings (later − earlier)."""
        return SpecCounters(
            self.num_drafts - other.num_drafts,
            self.num_draft_tokens - other.num_draft_tokens,
            self.num_accepted_tokens - other.num_accepted_tokens,
            _zip_pad(self.accepted_per_pos, other.accepted_per_pos, -1),
        )

    def to_dict(self) -> dict:
        d = asdict(self)
        d["accepted_per_pos"] = list(self.accepted_per_pos)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> SpecCounters:
        return cls(int(d["num_drafts"]), int(d["num_draft_tokens"]), int(d["num_accepted_tokens"]),
                   tuple(int(x) for x in d["accepted_per_pos"]))


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
    depend on it, it is fixed anyway so runs are comparable).
    """

    target: Path
    drafter: Path | None = None
    k: int = 3
    max_tokens: int = 64
    dtype: str = "float32"
    seed: int = 0
    max_model_len: int = 2048


@dataclass
class RunResult:
    """What a run produced.

    Attributes:
        outputs: per prompt (input order), the generated token ids.
        group_counters: per prompt group (category), the counters accumulated while that group ran;
            empty for a target-alone run.
        generate_seconds: wall time spent generating (s), excluding model loading.
        load_seconds: wall time to start the engine and load the weights (s).
        engine: engine name (e.g. ``vllm``); ``engine_version``: its version string.
    """

    outputs: list[list[int]]
    group_counters: dict[str, SpecCounters] = field(default_factory=dict)
    generate_seconds: float = 0.0
    load_seconds: float = 0.0
    engine: str = ""
    engine_version: str = ""

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

    def run(self, spec: RunSpec, prompt_token_ids: list[list[int]], groups: list[str],
            progress: ProgressFn | None = None) -> RunResult:
        """Greedily decode every prompt (token ids, chat template already applied).

        Prompts sharing a ``groups`` label are decoded together as one batch and the counters are
        read between batches, so :attr:`RunResult.group_counters` is per group. Both the
        target-alone run and the drafter run use the same batches, so batch composition cannot
        differ between them.

        Raises:
            EaglehubError: the engine is missing or the run failed (message names the cause).
        """
        ...
