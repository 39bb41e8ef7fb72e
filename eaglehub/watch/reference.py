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

    def to_dict(self) -> dict:
        return {
            "report": str(self.report),
            "drafter": self.drafter,
            "num_speculative_tokens": self.k,
            "acceptance_length": self.acceptance_length,
            "engine": self.engine,
            "settings": {k: self.settings[k] for k in ("max_tokens", "dtype", "temperature") if k in self.settings},
            "chosen_by": self.chosen_by,
        }


def _k(entry: dict) -> int:
    return int(entry["speculative_config"]["num_speculative_tokens"])


def choose_reference(path: str | Path, server_k: int | None, drafter: str | None = None) -> ReferenceAL:
    """Read the verify report at ``path`` and choose its entry (module doc).

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
        if server_k is not None and _k(entry) != server_k:
            raise UsageError(
                f"--reference-drafter {drafter} was measured at k={_k(entry)}, the server drafts k={server_k}",
                hint="AL depends on k: pass a reference report measured at the server's k",
            )
        chosen = f"--reference-drafter ({note})"
    else:
        candidates = [e for e in entries if server_k is None or _k(e) == server_k]
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
    return ReferenceAL(
        report=ref.path,
        drafter=entry["drafter"],
        k=_k(entry),
        acceptance_length=float(al),
        engine=ref.report["engine"],
        settings=ref.report["settings"],
        chosen_by=chosen,
    )
