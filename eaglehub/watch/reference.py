"""The reference AL of ``watch --reference-report``: one drafter entry of a verify report.

A server's ``/metrics`` names the target (the ``model_name`` label) and, through the per-position
counter, k, but not the drafter. So the entry is: the one ``--reference-drafter`` names (its path or
directory name); else the only entry at the server's k; else the first entry at that k (the choice is
said); an entry at another k is never used (AL depends on k). For a server whose k is unknown (SGLang),
the only entry, else the first.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eaglehub.errors import UsageError
from eaglehub.verify.regression import load_reference_report, match_reference_drafter


@dataclass(frozen=True)
class ReferenceAL:
    """The chosen entry: the report's path, the entry's ``drafter`` and k, its overall AL, the report's
    engine and settings (what the AL was measured with), and how the entry was chosen (``chosen_by``)."""

    report: Path
    drafter: str
    k: int
    acceptance_length: float
    engine: dict
    settings: dict
    chosen_by: str
    served: dict | None = None
    """What the reference AL depends on besides the drafter (:func:`reference_served`)."""
    not_at_k: str | None = None
    """Why the report has no AL at the served k (its AL is over a mix of ks): then nothing is judged."""

    def to_dict(self) -> dict:
        return {
            "report": str(self.report),
            "drafter": self.drafter,
            "num_speculative_tokens": self.k,
            "acceptance_length": self.acceptance_length,
            "engine": self.engine,
            "settings": {k: self.settings[k] for k in ("max_tokens", "dtype", "temperature") if k in self.settings},
            "chosen_by": self.chosen_by,
            "served": self.served,
        }


COMPARED = ("num_speculative_tokens", "k_schedule", "rejection_method", "draft_lm_head_quantization")
"""The settings an AL depends on besides the drafter, compared between a server and its reference."""


def _k(entry: dict, report: dict | None = None) -> int:
    """k of a report entry: its speculative config (a run eaglehub launched), else the endpoint's k (a
    ``verify --endpoint`` report, whose entry has no config), else the run's setting."""
    if entry.get("speculative_config"):
        return int(entry["speculative_config"]["num_speculative_tokens"])
    ep = (report or {}).get("endpoint") or {}
    return int(ep.get("num_speculative_tokens") or (report or {})["settings"]["num_speculative_tokens"])


def reference_served(report: dict, entry: dict) -> dict:
    """The :data:`COMPARED` settings the reference AL was measured with, those not known left out: a run
    eaglehub launched drafts a fixed k with standard rejection and the checkpoint's lm_head; a
    ``verify --endpoint`` report carries the server's (``endpoint.served``, where its values are known)."""
    ep = report.get("endpoint")
    if not ep:
        return {
            "num_speculative_tokens": _k(entry, report),
            "k_schedule": [],
            "rejection_method": "standard",
            "draft_lm_head_quantization": None,
        }
    out: dict = {"num_speculative_tokens": _k(entry, report)}
    settings = (ep.get("served") or {}).get("settings") or {}
    for key, name in (("k_schedule", "k_schedule"), ("rejection_method", "rejection_method")):
        if settings.get(name, {}).get("source", "unknown") != "unknown":
            out[key] = settings[name]["value"]
    quant = settings.get("draft_lm_head_quantization", {})
    if quant.get("source", "unknown") != "unknown":
        out["draft_lm_head_quantization"] = quant["value"]
    return out


def settings_differences(server: dict, reference: dict) -> list[str]:
    """``name: server value vs reference value`` for each :data:`COMPARED` setting both sides know and that
    differs (``server``: :meth:`~eaglehub.endpoint.settings.ServedSettings.comparable` of the known ones)."""
    import json

    def shown(v) -> str:
        return "none" if v in (None, []) else v if isinstance(v, str) else json.dumps(v)

    return [
        f"{key} {shown(server[key])} here, {shown(reference[key])} in the reference"
        for key in COMPARED
        if key in server and key in reference and server[key] != reference[key]
    ]


def _al_at_k(report: dict, al: float, k: int, chosen: str, keep_mix: bool) -> tuple[float, str, str | None]:
    """The reference AL at the served k: a ``verify --endpoint`` report whose AL is over a mix of ks (a k
    schedule, ``claims.acceptance_length`` ``mixed_k``) or at another k than the server's gives its AL at k
    from ``acceptance_by_k`` where it has one; else ``not_at_k`` says why there is no yardstick.
    ``keep_mix``: the server is known to run a schedule (its /metrics AL is a mix too): the overall AL is
    kept, and a schedule other than the reference's is W-WATCH-SETTINGS-DIFFER."""
    served = (report.get("endpoint") or {}).get("served") or {}
    claim = (served.get("claims") or {}).get("acceptance_length")
    if keep_mix or claim not in ("mixed_k", "one_k_this_load"):
        return al, chosen, None
    rows = served.get("acceptance_by_k") or []
    row = next((r for r in rows if r["k"] == k), None)
    if row is not None:
        if len(rows) == 1:
            return al, chosen, None
        return (
            float(row["acceptance_length"]),
            f"{chosen}; its AL at k={k} over {row['num_drafts']} steps (acceptance_by_k), not its overall AL "
            f"{al:.3f} over a mix of ks",
            None,
        )
    if claim == "one_k_this_load" and not rows:  # summary counters: every step drafted the report's k
        return al, chosen, None
    per = ", ".join(f"k={r['k']}: {r['num_drafts']} steps" for r in rows) or "no per-step counts"
    return (
        al,
        chosen,
        f"the reference AL {al:.3f} is over a mix of ks ({per}), not an AL at k={k}, and the report has no AL at "
        f"k={k}: no yardstick for the server's AL",
    )


def choose_reference(
    path: str | Path, server_k: int | None, drafter: str | None = None, scheduled: bool = False
) -> ReferenceAL:
    """Read the verify report at ``path`` and choose its entry (module doc); its AL at the server's k where
    the report's AL is over a mix of ks and the server is not known to run a schedule (``scheduled``).

    Raises:
        EaglehubError: (exit 2) the report is unreadable or not a verify report; ``drafter`` names no entry;
            no entry has the server's k; the chosen entry has no AL (nothing was drafted).
    """
    ref = load_reference_report(path)
    entries = ref.report["drafters"]
    names = ", ".join(Path(e["drafter"]).name for e in entries)
    if drafter is not None:
        entry, _, note = match_reference_drafter(Path(drafter).expanduser().resolve(), entries)
        if entry is None:
            same_name = [e for e in entries if Path(e["drafter"]).name == drafter]
            entry = same_name[0] if len(same_name) == 1 else None
            note = "matched by directory name"
        if entry is None:
            raise UsageError(
                f"--reference-drafter {drafter}: no such drafter in {ref.path}", hint=f"the report has: {names}"
            )
        if server_k is not None and _k(entry, ref.report) != server_k:
            raise UsageError(
                f"--reference-drafter {drafter} was measured at k={_k(entry, ref.report)}, the server drafts "
                f"k={server_k}",
                hint="AL depends on k: pass a reference report measured at the server's k",
            )
        chosen = f"--reference-drafter ({note})"
    else:
        candidates = [e for e in entries if server_k is None or _k(e, ref.report) == server_k]
        if not candidates:
            raise UsageError(
                f"reference report {ref.path} has no drafter at k={server_k}, the server's",
                hint="AL depends on k: run `eaglehub verify -k` with the server's num_speculative_tokens",
            )
        entry = candidates[0]
        at_k = f" at k={server_k}" if server_k is not None else ""
        if len(candidates) == 1:
            chosen = f"the only drafter{at_k} in the report"
        else:
            chosen = f"the first of {len(candidates)} drafters{at_k} in the report (choose with --reference-drafter)"
    al = entry["acceptance"]["overall"]["acceptance_length"]
    if al is None:
        raise UsageError(
            f"reference drafter {entry['drafter']} has no AL in {ref.path} (nothing was drafted)",
            hint="pass a report in which the drafter drafted",
        )
    al, chosen, not_at_k = _al_at_k(ref.report, float(al), server_k or _k(entry, ref.report), chosen, scheduled)
    return ReferenceAL(
        not_at_k=not_at_k,
        report=ref.path,
        drafter=entry["drafter"],
        k=_k(entry, ref.report),
        acceptance_length=al,
        engine=ref.report["engine"],
        settings=ref.report["settings"],
        chosen_by=chosen,
        served=reference_served(ref.report, entry),
    )
