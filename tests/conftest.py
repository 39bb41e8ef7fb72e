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
from helpers import finding_audit
from helpers.checkpoints import make_drafter_in, make_target_in
from helpers.engine_runs import shared_engine_runs  # noqa: F401  (fixture)
from helpers.fakehub import fake_hub, hf_env  # noqa: F401  (fixtures, for every test module)
from helpers.paths import FIXTURE
from helpers.real_runs import real_drafters  # noqa: F401  (session fixture)
from helpers.servers import session_server

OTHER_TIERS = ("slow", "vllm", "real", "engine")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """A test without a tier marker is a unit test (before ``-m`` selects: tryfirst). The tests of the session
    servers run last, one after another (stable: file order kept otherwise), so that each server runs only
    while its tests do (``pytest_runtest_teardown``)."""
    for item in items:
        if not any(item.get_closest_marker(t) for t in OTHER_TIERS):
            item.add_marker(pytest.mark.unit)
    items.sort(key=_uses_a_server)


def pytest_deselected(items):
    finding_audit.AUDIT.deselected += len(items)


def pytest_collection_finish(session):
    """Per session server, the last selected test that uses it (``-m`` and ``-k`` have deselected by now);
    whether the whole suite runs (helpers/finding_audit.py)."""
    files = {Path(str(item.path)) for item in session.items}
    audit = finding_audit.AUDIT
    audit.full_suite = audit.deselected == 0 and set(Path(__file__).parent.glob("test_*.py")) <= files
    _LAST_USER.clear()
    for item in session.items:
        for name in SESSION_SERVERS & set(getattr(item, "fixturenames", ())):
            _LAST_USER[name] = item


SESSION_SERVERS = frozenset({"fixture_server_process", "target_server"})
"""The session fixtures that hold a ``vllm serve`` process."""
_LAST_USER: dict[str, pytest.Item] = {}
"""Per session server: the last selected test that uses it."""
_STARTED: dict[str, object] = {}
"""Per session server: the started server (helpers/servers.VllmServer)."""


def _uses_a_server(item) -> bool:
    return bool(SESSION_SERVERS & set(getattr(item, "fixturenames", ())))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """A session server stops after the last test that uses it, not at the end of the session: an idle vLLM
    engine core polls, about half a core each on this machine, which every later test would lose."""
    try:
        return (yield)
    finally:
        for name, last in _LAST_USER.items():
            if last is item and name in _STARTED:
                _STARTED.pop(name).stop()  # type: ignore[attr-defined]


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

    _STARTED["fixture_server_process"] = server = session_server(request, resolve_target("smollm2"), FIXTURE, k=3)
    return server


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

    _STARTED["target_server"] = server = session_server(request, resolve_target("smollm2"), None)
    return server


def pytest_configure(config):
    finding_audit.install()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """The findings a test makes are its own (helpers/finding_audit.py)."""
    audit = finding_audit.AUDIT
    audit.current, audit.exempt = item.nodeid, item.get_closest_marker("bad_hints") is not None
    try:
        return (yield)
    finally:
        audit.current, audit.exempt = None, False


def pytest_sessionfinish(session, exitstatus):
    """A finding below the hint standard fails the session, though every test passed, and so does a rule no
    test made a finding of when the whole suite ran (both listed in the summary)."""
    audit = finding_audit.AUDIT
    if exitstatus == 0 and (finding_audit.problems() or (audit.full_suite and finding_audit.missing_rules())):
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter):
    """The findings the session made and any below the hint standard (helpers/finding_audit.py)."""
    from eaglehub.findings import RULES

    audit = finding_audit.AUDIT
    produced = {code for code, n in audit.produced.items() if n}
    terminalreporter.section("findings made (hint standard: a subject, a hint that keeps the tensors)")
    terminalreporter.write_line(
        f"{sum(audit.produced.values())} findings of {len(produced)} of the {len(RULES)} rules; "
        f"below the standard: {len(audit.bad)}"
    )
    for line in finding_audit.problems():
        terminalreporter.write_line(f"  {line}", red=True)
    if audit.full_suite and finding_audit.missing_rules():
        terminalreporter.write_line(f"  no finding made of: {', '.join(finding_audit.missing_rules())}", red=True)
    _print_shared_runs(terminalreporter)


def _print_shared_runs(terminalreporter):
    """Which engine runs the session shared (helpers/engine_runs.py): each run and how many tests asked for it."""
    from helpers.engine_runs import USES

    if USES:
        terminalreporter.section("shared engine runs (requests per run)")
        for label, n in USES.items():
            terminalreporter.write_line(f"{n} x {label}")
