"""A scripted in-memory engine for verify, pipeline and publish tests: fixed outputs and counters per run,
no model, and the 4-prompt file those scripts are written for (two math, two coding prompts)."""

import json

from eaglehub.engines.base import RunResult, SpecCounters

BASE = [
    [5, 6, 7, 8],
    [9, 10, 11],
    [12, 13],
    [14, 15, 16],
]  # outputs of the target alone, per prompt (m1 m2 c1 c2)


class ScriptedEngine:
    """Returns fixed outputs and counters per run: the target alone gives BASE, drafters their script."""

    name = "scripted"

    def __init__(self, scripts, version="1.0"):
        self.scripts = scripts  # drafter dir name -> (outputs, {category: SpecCounters})
        self.engine_version = version
        self.calls = []

    def version(self):
        return self.engine_version

    def run(self, spec, prompt_token_ids, groups, progress=None):
        self.calls.append((spec.drafter.name if spec.drafter else None, spec.k, spec.max_tokens))
        outputs, counters = (BASE, {}) if spec.drafter is None else self.scripts[spec.drafter.name]
        for g in dict.fromkeys(groups):
            if progress:
                progress(g, groups.count(g))
        return RunResult(
            outputs=[list(o) for o in outputs],
            group_counters=counters,
            generate_seconds=2.0,
            load_seconds=1.0,
            engine=self.name,
            engine_version=self.engine_version,
        )


GOOD = {
    "math": SpecCounters(6, 18, 9, (5, 3, 1)),
    "coding": SpecCounters(4, 12, 2, (2, 0, 0)),
}  # AL 2.5 / 1.5, overall 2.1
DEAD = {"math": SpecCounters(16, 48, 0, (0, 0, 0)), "coding": SpecCounters(14, 42, 0, (0, 0, 0))}


def write_prompts(path, text="question"):
    rows = [("m1", "math"), ("m2", "math"), ("c1", "coding"), ("c2", "coding")]
    path.write_text("".join(json.dumps({"id": i, "category": c, "prompt": f"{text} {i}"}) + "\n" for i, c in rows))
