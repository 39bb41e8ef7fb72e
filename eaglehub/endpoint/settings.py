"""What a server really runs: the engine, its version and the speculative settings that change what its
acceptance means, each with where it came from (:class:`ServedSettings`).

Read once per run (:func:`read_served_settings`), in this order of trust:

1. **the server** (``source: "server"``, ``where`` names the request and field):

   * vLLM: ``GET /version``; ``GET /server_info?config_format=json`` (vLLM's development endpoint, served only
     under ``VLLM_SERVER_DEV_MODE=1``; vllm 0.32.0 ``vllm/entrypoints/serve/dev/server_info/api_router.py``
     L43-59: the whole ``VllmConfig`` as JSON, so ``vllm_config.speculative_config`` carries
     ``num_speculative_tokens``, ``num_speculative_tokens_per_batch_size``, ``rejection_sample_method``,
     ``synthetic_acceptance_rates`` and, from vLLM 0.33, ``draft_lm_head_quantization``, after vLLM's own
     post-init: a schedule vLLM switched off (data parallelism, vllm 0.32.0 ``config/vllm.py`` L1056-1075,
     0.33.0 L1110-1127) reads ``null`` there). vLLM's ``/metrics`` has one info gauge, of the cache config
     only (vllm 0.32.0 ``v1/metrics/loggers.py`` L1114-1136: ``vllm:cache_config_info``), and ``/v1/models``
     says nothing speculative: without the development endpoint, the per-request metrics are all a vLLM
     server tells (k as ``num_spec_tokens``, and with ``--per-request-spec-decode-metrics detailed`` the
     tokens drafted at each verify step, which show a schedule at work: :func:`eaglehub.endpoint.steps.observed_ks`);
   * SGLang: ``GET /server_info`` (0.5.23, ``sglang/srt/entrypoints/http_server.py`` L863-894; older
     releases ``/get_server_info``): its resolved server arguments (``speculative_algorithm``,
     ``speculative_num_steps``, ``speculative_num_draft_tokens``, ``speculative_eagle_topk``,
     ``speculative_accept_threshold_single`` / ``_acc``, ``speculative_adaptive``,
     ``speculative_draft_model_quantization``; ``sglang/srt/arg_groups/fields/spec.py``) and ``version``;

2. **assumed** (``source: "assumed"``): what the user states with ``--served-config`` (the JSON given to
   ``vllm serve --speculative-config``, :func:`parse_served_config`), printed as an assumption;

3. **unknown**: neither says.

What each setting changes in a report (:meth:`ServedSettings.claims`, docs/verify.md "Served settings"):

* ``rejection_sample_method: synthetic`` (vllm 0.32.0 ``config/speculative.py`` L529-569, L1832-1847;
  ``v1/sample/rejection_sampler.py`` L83-96, L755-762): a draft token is accepted with a configured
  probability, never compared with the target's choice: the acceptance is the configured one and the
  outputs are not the target's: no measured AL, no losslessness verdict;
* ``fly`` (vLLM 0.33, ``config/speculative.py`` L562-569, L2014-2035: "a lossy speculative decoding
  method"), SGLang's ``speculative_accept_threshold_single`` / ``_acc`` below 1 (a draft accepted
  below the target's choice): lossy by design: no losslessness verdict, the AL is the lossy rule's;
* ``block`` (vLLM): block verification, lossless: judged like ``standard``;
* a k schedule (``num_speculative_tokens_per_batch_size``, vllm 0.32.0 ``config/speculative.py`` L491-496,
  ``v1/core/sched/scheduler.py`` L1486-1490: k chosen per batch size, clamped to
  ``num_speculative_tokens``, ``v1/spec_decode/dynamic/utils.py`` L77-150) or SGLang's
  ``speculative_adaptive``: the AL is a mix of ks; the per-position counters are sized by the largest k
  (vllm 0.32.0 ``v1/spec_decode/metrics.py`` L250-262) and count every verify step, also those that
  drafted fewer positions;
* ``draft_lm_head_quantization`` (vLLM 0.33 ``config/speculative.py`` L484-489, Model Runner V2 only) or
  SGLang's ``speculative_draft_model_quantization``: the drafter that runs is not the checkpoint's weights.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from eaglehub.endpoint.served_config import (
    LOSSLESS_METHODS,
    known_fields,
    parse_served_config,
    raw_config,
)

SERVER, ASSUMED, UNKNOWN = "server", "assumed", "unknown"


@dataclass(frozen=True)
class Setting:
    """One served setting: ``value``, ``source`` (``server`` / ``assumed`` / ``unknown``) and ``where`` it
    was read (the request and field, or the option)."""

    value: Any = None
    source: str = UNKNOWN
    where: str | None = None

    def to_dict(self) -> dict:
        return {"value": self.value, "source": self.source, "where": self.where}


@dataclass(frozen=True)
class ServedSettings:
    """The settings of one server (module doc). ``k`` is ``num_speculative_tokens``: the largest k under a
    schedule. ``k_schedule``: ``[[first batch size, last, k], ...]``, ``[]`` when the server runs a fixed k,
    ``"adaptive"`` (SGLang's ``speculative_adaptive``). ``synthetic``: ``{"acceptance_length": x}`` and/or
    ``{"acceptance_rates": [...]}``. ``conflicts``: an assumption the server contradicts (the server's
    value is used)."""

    engine: Setting = field(default_factory=Setting)
    version: Setting = field(default_factory=Setting)
    k: Setting = field(default_factory=Setting)
    k_schedule: Setting = field(default_factory=Setting)
    rejection_method: Setting = field(default_factory=Setting)
    synthetic: Setting = field(default_factory=Setting)
    draft_lm_head_quantization: Setting = field(default_factory=Setting)
    method: Setting = field(default_factory=Setting)
    drafter: Setting = field(default_factory=Setting)
    conflicts: tuple[str, ...] = ()

    NAMES = (
        "engine",
        "version",
        "k",
        "k_schedule",
        "rejection_method",
        "synthetic",
        "draft_lm_head_quantization",
        "method",
        "drafter",
    )

    def to_dict(self) -> dict:
        return {**{n: getattr(self, n).to_dict() for n in self.NAMES}, "conflicts": list(self.conflicts)}

    @classmethod
    def from_dict(cls, d: dict) -> ServedSettings:
        return cls(**{n: Setting(**d[n]) for n in cls.NAMES if n in d}, conflicts=tuple(d.get("conflicts", ())))

    @property
    def synthetic_run(self) -> bool:
        return self.rejection_method.value == "synthetic"

    @property
    def lossy(self) -> bool:
        """Outputs may differ from the target's by design (module doc)."""
        m = self.rejection_method.value
        return m is not None and m not in LOSSLESS_METHODS

    @property
    def scheduled(self) -> bool:
        return bool(self.k_schedule.value)

    def comparable(self) -> dict:
        """What an AL depends on besides the drafter, those known (not ``unknown``): compared by ``watch``
        with its reference (eaglehub/watch/reference.py)."""
        pairs = (
            ("num_speculative_tokens", self.k),
            ("k_schedule", self.k_schedule),
            ("rejection_method", self.rejection_method),
            ("draft_lm_head_quantization", self.draft_lm_head_quantization),
        )
        return {key: s.value for key, s in pairs if s.source != UNKNOWN}


def _vllm_settings(body: dict, where: str) -> dict[str, Setting]:
    cfg = (body.get("vllm_config") or {}).get("speculative_config")
    if not isinstance(cfg, dict):
        return {}
    at = f"{where} vllm_config.speculative_config"
    out = {
        "k": Setting(cfg.get("num_speculative_tokens"), SERVER, f"{at}.num_speculative_tokens"),
        "k_schedule": Setting(
            cfg.get("num_speculative_tokens_per_batch_size") or [],
            SERVER,
            f"{at}.num_speculative_tokens_per_batch_size",
        ),
        "rejection_method": Setting(
            cfg.get("rejection_sample_method") or "standard", SERVER, f"{at}.rejection_sample_method"
        ),
        "method": Setting(cfg.get("method"), SERVER, f"{at}.method"),
        "drafter": Setting(cfg.get("model"), SERVER, f"{at}.model"),
    }
    if cfg.get("rejection_sample_method") == "synthetic":
        # vLLM resolves a length to per-position rates and clears the length (config/speculative.py L1832-1839)
        rates = cfg.get("synthetic_acceptance_rates")
        value = {"acceptance_rates": rates, "acceptance_length": synthetic_al(rates)} if rates else None
        out["synthetic"] = Setting(value, SERVER, f"{at}.synthetic_acceptance_rates")
    # vLLM 0.33 added the field; a config without it is of a release that cannot quantize the drafter's head
    quant_at = f"{at}.draft_lm_head_quantization"
    if "draft_lm_head_quantization" not in cfg:
        quant_at += " (absent: no such setting in this release)"
    out["draft_lm_head_quantization"] = Setting(cfg.get("draft_lm_head_quantization"), SERVER, quant_at)
    return out


def _sglang_settings(body: dict, where: str) -> dict[str, Setting]:
    if not body.get("speculative_algorithm"):
        return {}
    steps = body.get("speculative_num_steps")
    single = body.get("speculative_accept_threshold_single", 1.0)
    acc = body.get("speculative_accept_threshold_acc", 1.0)
    relaxed = (single is not None and float(single) < 1.0) or (acc is not None and float(acc) < 1.0)
    method = (
        f"relaxed (accept_threshold_single {single}, accept_threshold_acc {acc})"
        if relaxed
        else "rejection_sampling"
        if body.get("speculative_use_rejection_sampling")
        else "standard"
    )
    quant = body.get("speculative_draft_model_quantization")
    return {
        "k": Setting(int(steps) if steps else None, SERVER, f"{where} speculative_num_steps"),
        "k_schedule": Setting(
            "adaptive" if body.get("speculative_adaptive") else [], SERVER, f"{where} speculative_adaptive"
        ),
        "rejection_method": Setting(method, SERVER, f"{where} speculative_accept_threshold_single / _acc"),
        "draft_lm_head_quantization": Setting(quant, SERVER, f"{where} speculative_draft_model_quantization"),
        "method": Setting(body.get("speculative_algorithm"), SERVER, f"{where} speculative_algorithm"),
        "drafter": Setting(body.get("speculative_draft_model_path"), SERVER, f"{where} speculative_draft_model_path"),
    }


def synthetic_al(rates: list[float] | None) -> float | None:
    """The AL vLLM's synthetic rates give: 1 + Σ of the unconditional per-position rates (each the chance
    that the first i+1 draft tokens are all accepted; vllm 0.32.0 ``config/speculative.py`` L537-569)."""
    return None if not rates else round(1.0 + sum(float(r) for r in rates), 6)


def from_server(info: tuple[str, dict] | None) -> tuple[str | None, dict[str, Setting]]:
    """The engine and settings a ``server_info`` answer (``(where, body)``) gives: vLLM's ``vllm_config``
    or SGLang's server arguments; ``(None, {})`` when the server has no such page."""
    if info is None:
        return None, {}
    where, body = info
    if not isinstance(body, dict):
        return None, {}
    if "vllm_config" in body:
        return "vllm", _vllm_settings(body, where)
    if "speculative_algorithm" in body or "launch_command" in body:
        out = _sglang_settings(body, where)
        if body.get("version"):
            out["version"] = Setting(str(body["version"]), SERVER, f"{where} version")
        return "sglang", out
    return None, {}


def assumed(cfg: dict | None) -> dict[str, Setting]:
    """The settings ``--served-config`` states (:func:`parse_served_config`), as assumptions."""
    if not cfg:
        return {}
    where = "--served-config"
    out: dict[str, Setting] = {}
    if "num_speculative_tokens" in cfg:
        out["k"] = Setting(cfg["num_speculative_tokens"], ASSUMED, where)
    for name, key in (("method", "method"), ("drafter", "model")):
        if cfg.get(key) is not None:
            out[name] = Setting(cfg[key], ASSUMED, where)
    if "num_speculative_tokens_per_batch_size" in cfg:
        out["k_schedule"] = Setting(cfg["num_speculative_tokens_per_batch_size"], ASSUMED, where)
    else:  # no schedule unless one is given (vllm 0.32.0 config/speculative.py L491-496: default None)
        out["k_schedule"] = Setting([], ASSUMED, f"{where}, vLLM's default")
    if "rejection_sample_method" in cfg:
        out["rejection_method"] = Setting(cfg["rejection_sample_method"], ASSUMED, where)
    else:  # a speculative config without the key runs vLLM's default (config/speculative.py L529)
        out["rejection_method"] = Setting("standard", ASSUMED, f"{where}, vLLM's default")
    if cfg.get("rejection_sample_method") == "synthetic":
        rates = cfg.get("synthetic_acceptance_rates")
        length = cfg.get("synthetic_acceptance_length")
        out["synthetic"] = Setting(
            {"acceptance_rates": rates, "acceptance_length": length if length is not None else synthetic_al(rates)},
            ASSUMED,
            where,
        )
    out["draft_lm_head_quantization"] = Setting(
        cfg.get("draft_lm_head_quantization"),
        ASSUMED,
        where if "draft_lm_head_quantization" in cfg else f"{where}, vLLM's default",
    )
    return out


def combine(
    engine: str | None, version: str | None, read: dict[str, Setting], given: dict[str, Setting]
) -> ServedSettings:
    """The server's settings where it gave them, else the assumptions, else unknown; an assumption the
    server contradicts is kept in ``conflicts`` (one line each)."""
    values: dict[str, Setting] = {}
    conflicts = []
    for name in ("k", "k_schedule", "rejection_method", "synthetic", "draft_lm_head_quantization", "method", "drafter"):
        server, user = read.get(name), given.get(name)
        if server is not None and (server.value is not None or name not in ("k", "method", "drafter")):
            values[name] = server
            if user is not None and user.value != server.value and not (name == "synthetic" and _same_al(user, server)):
                conflicts.append(
                    f"--served-config says {name} {_shown(user.value)}, {server.where} says {_shown(server.value)}: "
                    "the server's is used"
                )
        elif user is not None:
            values[name] = user
    if engine is not None:
        values["engine"] = Setting(engine, SERVER, "the server's answers")
    if "version" in read:
        values["version"] = read["version"]
    elif version and version != "unknown":
        values["version"] = Setting(version, SERVER, "GET /version")
    return ServedSettings(**values, conflicts=tuple(conflicts))


def _same_al(a: Setting, b: Setting) -> bool:
    la = (a.value or {}).get("acceptance_length")
    lb = (b.value or {}).get("acceptance_length")
    return la is not None and lb is not None and abs(float(la) - float(lb)) < 1e-6


def _shown(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def with_observed(
    settings: ServedSettings,
    k: int | None,
    k_source: str | None,
    ks: dict[int, int] | None,
    engine: tuple[str, str] | None = None,
) -> ServedSettings:
    """``settings`` with what the run's own counters say: k (``num_spec_tokens`` of the per-request metrics,
    or the per-position counter's length) where nothing better is known, a schedule the drafts show
    (steps that drafted fewer than k tokens, :func:`eaglehub.endpoint.steps.observed_ks`) where the server
    gave none, and the engine (``(name, where it was seen)``) where no settings page named it.

    Steps that all drafted one k show no schedule: a schedule drafts one k at one load too (its batch sizes
    in one range). So that sight leaves the schedule unknown, said in its ``where``; only the server's
    settings page or ``--served-config`` says there is none."""
    out = settings
    if engine is not None and out.engine.source == UNKNOWN:
        out = replace(out, engine=Setting(engine[0], SERVER, engine[1]))
    if k is not None and out.k.source != SERVER:
        if out.k.value is not None and out.k.value != k:
            out = replace(
                out,
                conflicts=(*out.conflicts, f"--served-config says num_speculative_tokens {out.k.value}, the server's "
                           f"{k_source} say {k}: the server's is used"),
            )  # fmt: skip
        out = replace(out, k=Setting(k, SERVER, k_source))
    if ks and len(ks) > 1 and out.k_schedule.source != SERVER:
        where = (
            "per-request metrics (per_step_drafted: "
            + ", ".join(f"k={x}: {n} steps" for x, n in sorted(ks.items()))
            + ")"
        )
        value = out.k_schedule.value if out.k_schedule.value else "varied"
        out = replace(out, k_schedule=Setting(value, SERVER, where))
    elif ks and len(ks) == 1 and out.k_schedule.source == UNKNOWN:
        only = next(iter(ks))
        out = replace(out, k_schedule=Setting(None, UNKNOWN, f"every step drafted k={only} at this load"))
    return out


def read_served_settings(
    client, served_config: str | None, version: str | None, timeout: float | None = None
) -> ServedSettings:
    """The server's settings (module doc), read once: its settings page where it has one, else the
    ``--served-config`` assumptions, else unknown.

    Raises:
        UsageError: ``served_config`` is not a valid speculative config (exit 2).
        EndpointError: the server refused the connection.
    """
    cfg = parse_served_config(served_config)
    engine, read = from_server(client.settings_page(timeout) if client is not None else None)
    said = read["version"].value if "version" in read else version if version and version != "unknown" else None
    if (
        cfg and served_config and said and engine in (None, "vllm")
    ):  # a setting the server's release cannot have contradicts it
        known_fields(raw_config(served_config), said)
    return combine(engine, version, read, assumed(cfg))
