"""``--served-config``: the JSON a vLLM server was started with (``vllm serve --speculative-config``), read
and checked as vLLM checks it, so a config the server could not have run is refused rather than reported on
(:mod:`eaglehub.endpoint.settings` turns it into assumed settings)."""

from __future__ import annotations

import json
import math
import re
from itertools import pairwise
from pathlib import Path
from typing import Any

from eaglehub.errors import UsageError

VLLM_METHODS = ("standard", "synthetic", "block", "fly")
"""vLLM's ``rejection_sample_method`` values (0.32: the first three; 0.33 adds ``fly``)."""
LOSSLESS_METHODS = ("standard", "block")
LM_HEAD_QUANT = ("fp8", "nvfp4")
SERVED_CONFIG_KEYS = (
    "num_speculative_tokens",
    "num_speculative_tokens_per_batch_size",
    "rejection_sample_method",
    "synthetic_acceptance_length",
    "synthetic_acceptance_rates",
    "draft_lm_head_quantization",
)
"""The keys of a ``--speculative-config`` JSON that change what a report may claim; others are ignored."""


def parse_served_config(text: str | None) -> dict | None:
    """``--served-config``: the JSON given to ``vllm serve --speculative-config`` (or a file holding it)
    → the :data:`SERVED_CONFIG_KEYS` it sets, checked as vLLM checks them.

    Raises:
        UsageError: not JSON, not an object, or a value vLLM would refuse (exit 2).
    """
    if text is None:
        return None
    where = "--served-config"
    cfg = raw_config(text)
    known_fields(cfg, None)
    out = {key: cfg[key] for key in (*SERVED_CONFIG_KEYS, "method", "model") if key in cfg}
    k = out.get("num_speculative_tokens")
    if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k < 1):
        raise UsageError(f"{where}: num_speculative_tokens {k!r} is not a positive integer", hint="e.g. 3")
    if "num_speculative_tokens_per_batch_size" in out:
        out["num_speculative_tokens_per_batch_size"] = check_schedule(
            out["num_speculative_tokens_per_batch_size"], where
        )
    method = out.get("rejection_sample_method")
    if method is not None and method not in VLLM_METHODS:
        raise UsageError(
            f"{where}: rejection_sample_method {method!r} is none of vLLM's", hint=f"one of {', '.join(VLLM_METHODS)}"
        )
    synthetic_keys = [key for key in ("synthetic_acceptance_length", "synthetic_acceptance_rates") if key in out]
    if synthetic_keys and method != "synthetic":
        # vllm 0.32.0 config/speculative.py L1840-1847 refuses them with another method
        raise UsageError(
            f"{where}: {synthetic_keys[0]} is only valid with rejection_sample_method 'synthetic' (vLLM refuses it)",
            hint="""add "rejection_sample_method": "synthetic" or drop it""",
        )
    if method == "synthetic":
        _synthetic(out, k, where)
    quant = out.get("draft_lm_head_quantization")
    if quant is not None and quant not in LM_HEAD_QUANT:
        raise UsageError(f"{where}: draft_lm_head_quantization {quant!r} is none of vLLM 0.33's", hint="fp8 or nvfp4")
    return out


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _synthetic(out: dict, k: int | None, where: str) -> None:
    """vLLM's check of a synthetic acceptance (vllm 0.32.0 ``config/speculative.py`` L566-601, applied at
    L1832-1839): exactly one of the rates and the length; the rates, one per draft position (k of them), each in
    [0, 1] and non-increasing; the length in [1, k + 1]. Without k in the config only what needs no k is checked."""
    rates, length = out.get("synthetic_acceptance_rates"), out.get("synthetic_acceptance_length")
    hint = """e.g. "synthetic_acceptance_length": 2.5, or one rate per draft position, non-increasing"""
    if (rates is None) == (length is None):
        raise UsageError(
            f"{where}: rejection_sample_method 'synthetic' needs exactly one of synthetic_acceptance_rates and "
            "synthetic_acceptance_length (vLLM refuses it otherwise)",
            hint=hint,
        )
    if rates is not None:
        ok = (
            isinstance(rates, list)
            and all(_number(r) and 0.0 <= r <= 1.0 for r in rates)
            and all(b <= a for a, b in pairwise(rates))
            and (k is None or len(rates) == k)
        )
        if not ok:
            count = f"{k} rates" if k is not None else "rates"
            raise UsageError(
                f"{where}: synthetic_acceptance_rates {rates!r} are not {count} in [0, 1], non-increasing "
                "(vLLM refuses them)",
                hint=hint,
            )
    elif isinstance(length, bool) or not (
        isinstance(length, int | float) and 1.0 <= length <= (k + 1 if k is not None else math.inf)
    ):
        top = f"{k + 1}" if k is not None else "k + 1"
        raise UsageError(
            f"{where}: synthetic_acceptance_length {length!r} is not in [1, {top}] (vLLM refuses it)", hint=hint
        )


def raw_config(text: str) -> dict:
    """The JSON object ``--served-config`` gives, inline or in a file."""
    raw = text.strip()
    where = "--served-config"
    if not raw.startswith(("{", "[")):
        try:
            raw = Path(raw).expanduser().read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(
                f"{where} {text}: neither a JSON object nor a readable file ({exc.strerror or exc})",
                hint="""e.g. --served-config '{"num_speculative_tokens": 3, "rejection_sample_method": "standard"}'""",
            ) from exc
    try:
        cfg = json.loads(raw)
    except ValueError as exc:
        raise UsageError(
            f"{where} is not JSON ({str(exc).splitlines()[0]})",
            hint="pass the JSON given to vllm serve --speculative-config, in single quotes",
        ) from exc
    if not isinstance(cfg, dict):
        raise UsageError(f"{where} is not a JSON object", hint="""e.g. '{"num_speculative_tokens": 3}'""")
    return cfg


def _vllm_tables(version: str | None) -> list:
    """The engine tables that judge a ``--served-config``: the server's vLLM release's own (same major.minor)
    where the server said its version, else every shipped vLLM release's (a key any of them has passes)."""
    from eaglehub.engines.tables import available_tables, engine_table

    shipped = [v for e, v in available_tables() if e == "vllm"]
    if version:
        mine = [v for v in shipped if _release(v)[:2] == _release(version)[:2]]
        if mine:
            return [engine_table("vllm", max(mine, key=_release))]
    return [engine_table("vllm", v) for v in shipped]


def known_fields(cfg: dict, version: str | None) -> None:
    """Refuse what vLLM refuses at start-up: a key that is no ``SpeculativeConfig`` field (a pydantic dataclass
    that forbids extra fields: vllm 0.32.0 and 0.33.0 ``config/utils.py`` L70-71) and a
    ``rejection_sample_method`` outside its ``RejectionSampleMethod`` literal (0.32.0 ``config/speculative.py``
    L84: standard, synthetic, block; 0.33.0 L83 adds fly), judged by the release the server reports (module
    doc) or, without one, by any shipped release.

    Raises:
        UsageError: such a key or method (exit 2).
    """
    tables = _vllm_tables(version)
    fields = {f.name for t in tables for f in t.speculative_config_fields}
    which = f"vLLM {tables[0].version}, the server's release" if version and len(tables) == 1 else "any vLLM release"
    unknown = sorted(key for key in cfg if key not in fields)
    if unknown:
        raise UsageError(
            f"--served-config: {', '.join(unknown)} is no speculative config field of {which} (vLLM refuses extra "
            "fields at start-up)",
            hint=f"drop {', '.join(unknown)}: pass the JSON the server was started with (--speculative-config)",
        )
    methods = {m for t in tables for m in t.rejection_sample_methods}
    method = cfg.get("rejection_sample_method")
    if version and method is not None and method not in methods:  # without a release: parse_served_config's check
        raise UsageError(
            f"--served-config: rejection_sample_method {method!r} is not in {which} (its methods: "
            f"{', '.join(sorted(methods))}): it contradicts the server",
            hint="pass the rejection_sample_method the server was started with (--speculative-config)",
        )


def check_schedule(value: Any, where: str) -> list[list[int]]:
    """A k schedule checked as vLLM checks it (vllm 0.32.0 ``v1/spec_decode/dynamic/utils.py`` L7-74:
    triples, positive ranges, non-overlapping, sorted, the first starting at batch size 1)."""
    hint = "e.g. [[1, 4, 3], [5, 256, 1]]: (first batch size, last batch size, k), the first starting at 1"
    if not isinstance(value, list) or not value:
        raise UsageError(f"{where}: num_speculative_tokens_per_batch_size is not a non-empty list", hint=hint)
    rows = []
    for entry in value:
        if not isinstance(entry, list) or len(entry) != 3 or not all(isinstance(x, int) for x in entry):
            raise UsageError(f"{where}: schedule entry {entry!r} is not [first, last, k]", hint=hint)
        if entry[0] <= 0 or entry[0] > entry[1] or entry[2] < 0:
            raise UsageError(f"{where}: schedule entry {entry!r} is not a positive range with k >= 0", hint=hint)
        rows.append(list(entry))
    rows.sort(key=lambda r: r[0])
    if rows[0][0] != 1 or any(b[0] <= a[1] for a, b in pairwise(rows)):
        raise UsageError(f"{where}: schedule {value!r} must start at batch size 1 without overlaps", hint=hint)
    return rows


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"[0-9]+", version)[:3])


__all__ = ["LM_HEAD_QUANT", "LOSSLESS_METHODS", "SERVED_CONFIG_KEYS", "VLLM_METHODS", "check_schedule", "known_fields",
           "parse_served_config", "raw_config"]  # fmt: skip
