"""The determinism guard blames only the user's workflow code (issue 46, item 1).

Under ``durable dev`` the engine itself reads the real clock (its scaled clock), the local
Lambda context's deadline and its ledger's HTTP client while workflow code is guarded; none
of that may be reported as the workflow's doing. A call the workflow makes itself, directly
or through a library, still is, at the workflow's own line.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import sys
import time
import types
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from durable import App, Context, RunStatus
from durable.core.clock import Epoch, FakeClock, ScaledClock
from durable.engine.determinism import NonDeterministicCall, WarningGuard
from durable.engine.run_logging import WORKFLOW_LOGGER
from durable.testing import LocalRunner

pytestmark = pytest.mark.unit

SCAFFOLD_WORKFLOWS = (
    Path(__file__).resolve().parents[2] / "durable/scaffold/project/PACKAGE/workflows.py.tmpl"
)


class _DevClock(FakeClock):
    """A fake clock that also goes through ``durable dev``'s real clock path on every read
    (``ScaledClock.now`` calls ``time.time()``), so the engine reads the real clock while
    workflow code is guarded, as it does under ``durable dev``."""

    def __init__(self) -> None:
        super().__init__()
        self._scaled = ScaledClock(Epoch(scale=60.0, real_epoch=time.time(), virtual_epoch=0.0))

    def now(self) -> datetime:
        self._scaled.now()
        return super().now()


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextmanager
def _warnings() -> Iterator[list[str]]:
    """The guard's warning lines, as durable dev's console would print them."""
    handler = _Lines()
    level = WORKFLOW_LOGGER.level
    WORKFLOW_LOGGER.addHandler(handler)
    WORKFLOW_LOGGER.setLevel(logging.INFO)
    try:
        yield handler.lines
    finally:
        WORKFLOW_LOGGER.removeHandler(handler)
        WORKFLOW_LOGGER.setLevel(level)


def _dev_runner(app: App) -> LocalRunner:
    runner = LocalRunner(app, clock=_DevClock())
    runner.engine.guard = WarningGuard()
    return runner


def _load(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _line_of(fn: Callable[..., Any], text: str) -> int:
    """The line number of ``text`` inside ``fn``'s source (a call site the guard must name)."""
    code = fn.__code__
    lines = Path(code.co_filename).read_text().splitlines()
    for number in range(code.co_firstlineno, len(lines) + 1):
        if text in lines[number - 1]:
            return number
    raise AssertionError(f"{text!r} not in {fn.__name__}")


# --- (a) (b) (c): workflows that do nothing wrong are not warned -----------------------------


def test_a_workflow_that_only_calls_steps_is_not_warned_while_the_engine_reads_the_clock() -> None:
    app = App()

    @app.step
    def fetch(n: int) -> int:
        return n + 1

    @app.step
    def stamp() -> str:
        return datetime.now(UTC).isoformat()  # a step may read the clock

    @app.workflow(name="steps-only")
    def steps_only(ctx: Context, n: int) -> int:
        total = fetch(n)
        stamp()
        ctx.sleep(timedelta(minutes=5))
        return fetch(total)

    runner = _dev_runner(app)
    with _warnings() as lines:
        run_id = runner.start("steps-only", 1).run_id
        runner.run_until_idle()
        runner.advance(minutes=10)
    assert runner.get_run(run_id).status == RunStatus.SUCCEEDED
    assert lines == []


def test_the_scaffolds_greet_workflow_is_not_warned(tmp_path: Path) -> None:
    target = tmp_path / "scaffold_greet_workflows.py"
    target.write_text(SCAFFOLD_WORKFLOWS.read_text())  # no placeholders in this template
    module = _load(target, "scaffold_greet_workflows")
    try:
        runner = _dev_runner(module.app)
        with _warnings() as lines:
            run_id = runner.start("greet", {"name": "Ann"}).run_id
            runner.run_until_idle()
            runner.complete_wait(run_id, "approval", "ok")
            runner.run_until_idle()
            runner.advance(hours=2)
            team = runner.start("greet-all", ["a", "b", "c"]).run_id
            runner.run_until_idle()
        assert runner.get_run(run_id).status == RunStatus.SUCCEEDED
        assert runner.result(run_id) == "sent: Hello, Ann!"
        assert runner.get_run(team).status == RunStatus.SUCCEEDED
        assert lines == []
    finally:
        sys.modules.pop("scaffold_greet_workflows", None)


def test_a_docs_example_workflow_is_not_warned() -> None:
    from examples import onboarding
    from examples.services import services

    services.reset()
    runner = _dev_runner(onboarding.app)
    with _warnings() as lines:
        run_id = runner.start("onboarding-parallel", {"user_id": "u1", "email": "u1@x.io"}).run_id
        runner.run_until_idle()
        runner.advance(days=3)
    assert runner.get_run(run_id).status == RunStatus.SUCCEEDED
    assert lines == []


# --- the frame layouts: engine, third-party library, user ------------------------------------

_LIBRARY_SOURCE = """
import socket
import time


def read_clock():
    return time.time()


def resolve():
    return socket.getaddrinfo("127.0.0.1", 9)
"""

_ENGINE_SOURCE = """
import time

import vendorlib


def own_clock():
    return time.time()


def through_library():
    return vendorlib.read_clock()


def own_network():
    return vendorlib.resolve()
"""


@pytest.fixture
def layout(tmp_path: Path) -> Iterator[tuple[types.ModuleType, types.ModuleType]]:
    """A third-party module installed under a ``site-packages`` folder, and a module of the
    ``durable`` package kept outside the package's folder (as in a Lambda bundle, where
    everything shares one folder)."""
    site = tmp_path / "site-packages"
    site.mkdir()
    (site / "vendorlib.py").write_text(_LIBRARY_SOURCE)
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "engine_probe.py").write_text(_ENGINE_SOURCE)
    sys.path.insert(0, str(site))
    try:
        library = _load(site / "vendorlib.py", "vendorlib")
        engine = _load(bundle / "engine_probe.py", "durable.core._engine_probe")
        yield library, engine
    finally:
        sys.path.remove(str(site))
        sys.modules.pop("vendorlib", None)
        sys.modules.pop("durable.core._engine_probe", None)


def test_calls_the_engine_makes_for_itself_are_not_the_workflows(
    layout: tuple[types.ModuleType, types.ModuleType],
) -> None:
    _, engine = layout
    app = App()

    @app.workflow(name="w")
    def w(ctx: Context) -> str:
        engine.own_clock()  # e.g. durable.core.clock's ScaledClock
        engine.through_library()  # e.g. the ledger's botocore, urllib3 timeouts
        engine.own_network()  # e.g. the ledger's HTTP connection
        return "ok"

    runner = _dev_runner(app)
    with _warnings() as lines:
        run_id = runner.start("w").run_id
        runner.run_until_idle()
    assert runner.result(run_id) == "ok"
    assert lines == []
    # the failing guard (LocalRunner's) agrees
    strict = LocalRunner(app)
    strict_id = strict.start("w").run_id
    strict.run_until_idle()
    assert strict.result(strict_id) == "ok"


def test_a_library_the_workflow_calls_is_blamed_on_the_workflows_line(
    layout: tuple[types.ModuleType, types.ModuleType],
) -> None:
    library, _ = layout
    app = App()

    @app.workflow(name="w")
    def w(ctx: Context) -> str:
        library.read_clock()  # the workflow's doing, through a library
        return "ok"

    runner = _dev_runner(app)
    with _warnings() as lines:
        runner.start("w")
        runner.run_until_idle()
    where = f"test_determinism_blame.py:{_line_of(w, 'library.read_clock()')}"
    assert len(lines) == 1 and "time.time()" in lines[0] and where in lines[0], lines


# --- (d): the workflow's own calls are still warned, at its own lines ------------------------


def test_the_workflows_own_clock_uuid_and_datetime_calls_are_warned_at_its_lines() -> None:
    app = App()

    @app.workflow(name="careless")
    def careless(ctx: Context) -> str:
        a = time.time()
        b = uuid.uuid4()
        c = datetime.now(UTC)
        ctx.sleep(timedelta(minutes=1))
        return f"{a} {b} {c}"

    runner = _dev_runner(app)
    with _warnings() as lines:
        run_id = runner.start("careless").run_id
        runner.run_until_idle()
        runner.advance(minutes=2)  # replays: still one line per call site
    assert runner.get_run(run_id).status == RunStatus.SUCCEEDED
    expected = {
        "time.time()": _line_of(careless, "time.time()"),
        "uuid.uuid4()": _line_of(careless, "uuid.uuid4()"),
        "datetime.now()": _line_of(careless, "datetime.now(UTC)"),
    }
    assert len(lines) == 3, lines
    for (what, line), text in zip(expected.items(), lines, strict=True):
        assert f"workflow code called {what} outside a step" in text
        assert f"(test_determinism_blame.py:{line})" in text

    # LocalRunner's guard fails the same code at the first call
    strict = LocalRunner(app)
    strict.start("careless")
    with pytest.raises(NonDeterministicCall, match=r"time\.time\(\)"):
        strict.run_until_idle()


def test_the_network_called_by_the_workflow_through_urllib_is_blamed_on_its_line() -> None:
    app = App()

    @app.workflow(name="fetcher")
    def fetcher(ctx: Context) -> str:
        # the unit tier refuses the connection; the guard has spoken by then
        with contextlib.suppress(Exception):
            urllib.request.urlopen("http://127.0.0.1:9/", timeout=1)
        return "done"

    runner = _dev_runner(app)
    with _warnings() as lines:
        runner.start("fetcher")
        runner.run_until_idle()
    where = f"(test_determinism_blame.py:{_line_of(fetcher, 'urlopen(')})"
    assert lines and all("the network (socket." in text for text in lines), lines
    assert all(where in text for text in lines), lines
