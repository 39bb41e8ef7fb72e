"""What one vLLM release accepts from eaglehub's launch lines: its speculative methods and ``SpeculativeConfig``
fields, its ``EngineArgs`` (the ``LLM(...)`` keywords and ``vllm serve`` flags) and the runner it picks on CUDA,
all from the engine table of that release (:mod:`eaglehub.engines.tables`, generated from the release's code).

* ``SpeculativeConfig`` is a pydantic dataclass that forbids extra fields (vllm 0.33.0 ``config/utils.py``
  L70-71) and types ``method`` as the ``SpeculativeMethod`` literal (``config/speculative.py`` L74-82, L419):
  a key or method the release lacks is refused at start-up. 0.33 removed ``medusa`` and ``mlp_speculator``
  (still in 0.32.0's literal, ``config/speculative.py`` L73-76).
* ``vllm serve`` has one flag per ``EngineArgs`` field, and ``LLM(**kwargs)`` passes its keywords to
  ``EngineArgs``; ``per_request_spec_decode_metrics`` is one from 0.32 on.
* The runner: on CUDA, 0.32 and 0.33 run Model Runner V2 unless ``VLLM_USE_V2_MODEL_RUNNER`` is set
  (0.33.0 ``config/vllm.py`` L748-767; 0.32.0 L720-739), so a ``-v1`` profile's launch line sets it to 0;
  earlier releases run V1 without it.
"""

from __future__ import annotations

from dataclasses import dataclass

from eaglehub.engines.tables import EngineTable, TableChoice, profile_table
from eaglehub.errors import EaglehubError, UsageError
from eaglehub.profiles.registry import CPU, DEFAULT_PROFILE, GPU, MRV2, V1, VLLM, Profile, resolve

RUNNER_ENV = "VLLM_USE_V2_MODEL_RUNNER"
#: the release that made Model Runner V2 the CUDA default (docs/profiles.md)
MRV2_DEFAULT_FROM = "0.32.0"
#: ``EngineArgs.per_request_spec_decode_metrics`` exists from this release on
PER_REQUEST_METRICS_FROM = "0.32.0"


@dataclass(frozen=True)
class Release:
    """A vLLM profile a launch line is written for, with the table that says what its release accepts."""

    profile: Profile
    choice: TableChoice
    asked: bool = False

    @classmethod
    def of(cls, profile: Profile | str, asked: bool = True) -> Release:
        """The release of any vLLM profile (a CPU one too: a model card's serve line); see :func:`release` for
        launch plans, which are for GPUs only."""
        p = profile if isinstance(profile, Profile) else resolve(profile)
        if p.engine != VLLM:
            raise UsageError(f"a vllm serve line is for vLLM; {p.id} is {p.title}", hint="use a vLLM profile")
        return cls(p, profile_table(p), asked)

    @property
    def table(self) -> EngineTable:
        return self.choice.table

    @property
    def env(self) -> dict[str, str]:
        """Environment the launch line needs for the profile's runner: V1 on CUDA where MRV2 is the default."""
        if self.profile.platform == GPU and self.profile.runner == V1 and self.profile.at_least(MRV2_DEFAULT_FROM):
            return {RUNNER_ENV: "0"}
        return {}

    @property
    def runner_words(self) -> str:
        if self.profile.runner == MRV2:
            return "Model Runner V2 (the CUDA default)"
        if self.env:
            return f"the V1 runner ({RUNNER_ENV}=0)"
        return "the V1 runner"

    @property
    def per_request_metrics(self) -> bool:
        """Whether this release's ``EngineArgs`` has ``per_request_spec_decode_metrics``."""
        args = self.table.engine_args
        return self.profile.at_least(PER_REQUEST_METRICS_FROM) and (
            args is None or "per_request_spec_decode_metrics" in args
        )

    def section(self) -> dict:
        """The report's ``profile``: which release and runner the lines are for, and which table judged them."""
        return {
            "id": self.profile.id,
            "title": self.profile.title,
            "default": not self.asked,
            "runner": self.runner_words,
            "env": dict(self.env),
            "table": self.table.key,
            "table_note": self.choice.note,
        }


def release(spec: str | None) -> Release:
    """The vLLM release a launch plan is for: ``spec`` (a profile id), else :data:`DEFAULT_PROFILE`.

    Raises:
        EaglehubError: an unknown profile; an SGLang or CPU profile (a launch plan is a ``vllm serve`` line for
            GPUs) (exit 2).
    """
    p = resolve(spec or DEFAULT_PROFILE)
    if p.engine != VLLM:
        raise UsageError(
            f"a launch plan is a vllm serve line; {p.id} is {p.title}",
            hint=f"plan for a vLLM release on GPU, e.g. --profile {DEFAULT_PROFILE}",
        )
    if p.platform == CPU:
        raise UsageError(
            f"a launch plan sizes GPUs; {p.id} is vLLM's CPU build",
            hint=f"plan for that release on GPU: --profile {p.id.removesuffix('-cpu')}-gpu",
        )
    return Release(p, profile_table(p), asked=spec is not None)


def check_speculative_config(config: dict, rel: Release) -> None:
    """Refuse a ``speculative_config`` the release would refuse: a method its ``SpeculativeMethod`` lacks, a key
    that is not a ``SpeculativeConfig`` field.

    Raises:
        EaglehubError: naming the method or keys and the release (exit 1).
    """
    t, where = rel.table, rel.choice.title + (f" ({rel.choice.note})" if rel.choice.note else "")
    method = config.get("method")
    if method is not None and method not in t.speculative_methods:
        raise EaglehubError(
            f"{where} has no speculative method {method!r} (SpeculativeConfig.method is one of "
            f"{', '.join(t.speculative_methods[:8])}, ...): the release refuses the line at start-up",
            hint="plan for a release that has it (--profile vllm-X.Y)",
            exit_code=1,
        )
    unknown = sorted(k for k in config if t.config_field(k) is None)
    if unknown:
        raise EaglehubError(
            f"{where}'s SpeculativeConfig has no field {', '.join(unknown)}: it forbids extra fields and refuses "
            "the line at start-up",
            hint="plan for a release that has it (--profile vllm-X.Y)",
            exit_code=1,
        )


def check_engine_args(kwargs: dict, rel: Release, what: str) -> None:
    """Refuse ``LLM(...)`` keywords / ``vllm serve`` options the release's ``EngineArgs`` lacks.

    Raises:
        EaglehubError: naming them and the release (exit 1).
    """
    args = rel.table.engine_args
    if args is None:
        return
    unknown = sorted(k for k in kwargs if k not in args)
    if unknown:
        where = rel.choice.title + (f" ({rel.choice.note})" if rel.choice.note else "")
        raise EaglehubError(
            f"{where}'s EngineArgs has no {', '.join(unknown)}: {what} would be refused",
            hint="plan for a release that has it (--profile vllm-X.Y)",
            exit_code=1,
        )


__all__ = [
    "RUNNER_ENV",
    "Release",
    "check_engine_args",
    "check_speculative_config",
    "release",
]
