"""pytest plugin for the coverage pass: which test runs which line of the target modules.

Loaded with ``-p tests.mutation.trace`` by ``selection``; inert unless
``MUTATION_TRACE_OUT`` names the JSON file to write. Measurement starts when pytest loads
this plugin, before the conftest imports the engine, so import-time lines count too (under
the empty context). Each test's setup, call and teardown run under its node id as coverage's
dynamic context.
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator
from pathlib import Path

import coverage
import pytest

OUT_ENV = "MUTATION_TRACE_OUT"
INCLUDE_ENV = "MUTATION_TRACE_INCLUDE"

_out = os.environ.get(OUT_ENV)
_include = [p for p in os.environ.get(INCLUDE_ENV, "").split(os.pathsep) if p]
_cov: coverage.Coverage | None = None
if _out:
    _cov = coverage.Coverage(data_file=None, include=_include, config_file=False)
    _cov.start()

_durations: dict[str, float] = {}
_failed: set[str] = set()
_skipped: set[str] = set()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    if _cov is not None:
        _cov.switch_context(item.nodeid)
    try:
        return (yield)
    finally:
        if _cov is not None:
            _cov.switch_context("")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _durations[report.nodeid] = _durations.get(report.nodeid, 0.0) + report.duration
    if report.failed:
        _failed.add(report.nodeid)
    if report.skipped:
        _skipped.add(report.nodeid)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _cov is None or _out is None:
        return
    _cov.stop()
    data = _cov.get_data()
    root = Path(session.config.rootpath)
    lines: dict[str, dict[str, list[str]]] = {}
    for filename in data.measured_files():
        rel = Path(filename).resolve().relative_to(root).as_posix()
        by_line = data.contexts_by_lineno(filename)
        lines[rel] = {str(n): sorted(set(contexts)) for n, contexts in by_line.items()}
    tests = {
        nodeid: {"duration": round(seconds, 4), "passed": nodeid not in _failed}
        for nodeid, seconds in _durations.items()
        if nodeid not in _skipped
    }
    Path(_out).write_text(json.dumps({"tests": tests, "lines": lines}))
