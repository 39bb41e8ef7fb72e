"""Test tiers, the tiny-checkpoint fixtures, the fake Hub fixtures, the real pair's shared engine runs and
its served endpoints (``fixture_server``, ``target_server``: real ``vllm serve`` processes, helpers/servers.py).

Tiers (tests/README.md): ``unit`` (fast, no engine; every test without another tier marker gets it here),
``slow`` (an engine or heavy CPU work, no vLLM), ``vllm`` (runs vLLM), ``real`` (the real
SmolLM2-135M-Instruct target). Plain ``pytest`` runs the unit tier (pyproject ``addopts``); ``make test``
runs them all.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.checkpoints import make_drafter_in, make_target_in
from helpers.engine_runs import shared_engine_runs  # noqa: F401  (fixture)
from helpers.fakehub import fake_hub, hf_env  # noqa: F401  (fixtures, for every test module)
from helpers.paths import FIXTURE
from helpers.real_runs import real_drafters  # noqa: F401  (session fixture)
from helpers.servers import session_server

OTHER_TIERS = ("slow", "vllm", "real")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """A test without a tier marker is a unit test (before ``-m`` selects: tryfirst)."""
    for item in items:
        if not any(item.get_closest_marker(t) for t in OTHER_TIERS):
            item.add_marker(pytest.mark.unit)


@pytest.fixture
def make_drafter(tmp_path: Path):
    """Factory: ``make_drafter(name, mutate=fn(cfg, tensors), v31=False, fmt="safetensors")`` → dir."""
    return lambda *args, **kw: make_drafter_in(tmp_path, *args, **kw)


@pytest.fixture
def make_target(tmp_path: Path):
    """Factory: ``make_target(n_layers=8, weights=False, name=..., **config overrides)`` → dir."""
    return lambda *args, **kw: make_target_in(tmp_path, *args, **kw)


@pytest.fixture(scope="session")
def fixture_server_process(request):
    """The one ``vllm serve`` process behind ``fixture_server``, started on first use, stopped at the end of the
    session (helpers/servers.py)."""
    from eaglehub.target import resolve_target

    return session_server(request, resolve_target("smollm2"), FIXTURE, k=3)


@pytest.fixture
def fixture_server(fixture_server_process):
    """``vllm serve`` of SmolLM2-135M-Instruct + the fixture drafter at k 3; tests using it are marked ``vllm``
    and ``real``. A test that redeployed another drafter on it (the watch's upgrade test) leaves it so: the
    next test that asks for it pays the restart back to the fixture, so the last user redeploys for free."""
    server = fixture_server_process
    if server.drafter != FIXTURE.resolve() or not server.running:
        server.restart(drafter=FIXTURE)
    return server


@pytest.fixture(scope="session")
def target_server(request):
    """``vllm serve`` of SmolLM2-135M-Instruct alone (the losslessness baseline); as ``fixture_server``."""
    from eaglehub.target import resolve_target

    return session_server(request, resolve_target("smollm2"), None)


def pytest_terminal_summary(terminalreporter):
    """Which engine runs the session shared (helpers/engine_runs.py): each run and how many tests asked for it."""
    from helpers.engine_runs import USES

    if USES:
        terminalreporter.section("shared engine runs (requests per run)")
        for label, n in USES.items():
            terminalreporter.write_line(f"{n} x {label}")
