"""Engine runs shared across the tests of a session.

A greedy engine run is a pure function of its request: the target, the drafter (its files), the decoding
settings, the prompt token ids and their batches. The real pair's end-to-end tests each run
``eaglehub verify`` (or ``pipeline``) as a user does, on the same prompts with the same settings
(helpers/real_runs.py), so most of their runs are the same runs: the target alone in vLLM, the fixture
drafter in vLLM, the target alone and the fixture in the reference engine. With :func:`shared_engine_runs`
the first test to need a run starts the engine; every later identical request in the session gets that
run's result (a copy). A request that differs in anything (another drafter, another setting, other
prompts) is a new run, so a test that passes different settings still gets its own engine run.

Only greedy runs (temperature 0) are shared: sampled runs are random draws, which two tests must not share.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections import Counter
from pathlib import Path

import pytest

from eaglehub.engines.reference import ReferenceEngine
from eaglehub.engines.vllm_engine import VllmEngine

_RUNS: dict[str, object] = {}
USES: Counter = Counter()
"""Per request label (engine, drafter name, settings): how many runs the session asked for."""


def _fingerprint(path: Path | None) -> list | None:
    """The drafter's files (name, size, mtime): a drafter rewritten in place is a new request."""
    if path is None:
        return None
    root = Path(path).resolve()
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return [str(root), *[(str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns) for p in files]]


def _key(engine, spec, prompt_token_ids, groups) -> str:
    fields = dataclasses.asdict(spec)
    fields["target"] = str(Path(spec.target).resolve())
    fields["drafter"] = _fingerprint(spec.drafter)
    # an option set to None is an option not passed (vLLM's request builder drops it too)
    fields["engine_options"] = {k: v for k, v in spec.engine_options.items() if v is not None}
    state = {"kv_cache_bytes": engine.kv_cache_bytes} if isinstance(engine, VllmEngine) else {}
    if isinstance(engine, ReferenceEngine):
        state = {"device": engine.device, "rule": engine.rule.name}
    return json.dumps([engine.name, state, fields, prompt_token_ids, groups], sort_keys=True, default=str)


def _label(engine, spec, prompt_token_ids) -> str:
    drafter = Path(spec.drafter).name if spec.drafter else "target alone"
    return f"{engine.name}: {drafter} (k={spec.k}, {len(prompt_token_ids)} prompts, {spec.max_tokens} tokens)"


def _shared(original):
    def run(self, spec, prompt_token_ids, groups, progress=None):
        if spec.temperature != 0:
            return original(self, spec, prompt_token_ids, groups, progress)
        key = _key(self, spec, prompt_token_ids, groups)
        USES[_label(self, spec, prompt_token_ids)] += 1
        if key not in _RUNS:
            _RUNS[key] = original(self, spec, prompt_token_ids, groups, progress)
        elif progress:
            for group in dict.fromkeys(groups):
                progress(group, groups.count(group))
        return copy.deepcopy(_RUNS[key])

    return run


@pytest.fixture
def shared_engine_runs(monkeypatch):
    """vLLM and reference-engine runs shared with the session's earlier identical requests (module doc)."""
    for cls in (VllmEngine, ReferenceEngine):
        monkeypatch.setattr(cls, "run", _shared(cls.__dict__["run"]))
    return USES
