"""Runs one mutant's tests in a forked child, with a timeout: one worker, one at a time.

The parent imports pytest and the heavy test dependencies once (about 2 s of every
``pytest`` start) but never the engine; each mutant's child is forked from it, installs the
mutant's import hook, runs ``pytest -x`` on the selected tests and reports the exit code
and the first failing test through a pipe. The fastest tests run first, in a batch of
their own: most mutants fail one of them, and the rest (and their modules' collection) is
only paid for by the mutants that survive it.

Time-outs: each test has its own limit (a multiple of its time in the coverage pass, so a
mutant that makes workers spin costs seconds, not minutes); the child reports the test
that overran and exits. The whole run also has a limit, enforced by the parent: the child
leads its own process group, so that kills it and anything it started, by the group's id.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import sys
import time
from collections.abc import Generator
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Literal

import pytest

from tests.mutation.hook import install

# Imported once in the parent so each forked child finds them loaded.
_PRELOAD = (
    "hypothesis",
    "schemathesis",
    "boto3",
    "botocore.session",
    "moto",
    "moto.core.models",
    "pydantic",
    "pynamodb",
    "aws_lambda_powertools",
    "yaml",
)

Status = Literal["killed", "timeout", "survived", "no_tests", "error"]
MutantCode = tuple[str, CodeType, str]  # module name, mutated code, file name
FIRST_BATCH = 30


@dataclass(frozen=True, slots=True)
class Outcome:
    status: Status
    seconds: float
    detail: str = ""  # the test that failed first, or why it is an error


def preload() -> None:
    for name in _PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    engine = [m for m in sys.modules if m == "durable" or m.startswith("durable.")]
    if engine:
        raise RuntimeError(f"the mutation runner imported the engine ({engine[0]})")


class _FirstFailure:
    """pytest plugin: remembers the first test that failed."""

    def __init__(self) -> None:
        self.nodeid = ""

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed and not self.nodeid:
            self.nodeid = report.nodeid

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed and not self.nodeid:
            self.nodeid = f"collecting {report.nodeid}"


class _Watchdog:
    """pytest plugin: a test that overruns its limit ends the child, reported as a time-out."""

    def __init__(self, limits: dict[str, float], write: int) -> None:
        self.limits = limits
        self.write = write
        self.nodeid = ""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        self.nodeid = item.nodeid
        signal.signal(signal.SIGALRM, self._expired)
        signal.setitimer(signal.ITIMER_REAL, self.limits.get(item.nodeid, 60.0))
        try:
            return (yield)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def _expired(self, signum: int, frame: FrameType | None) -> None:
        os.write(self.write, json.dumps({"exit": "timeout", "failed": self.nodeid}).encode())
        os._exit(0)


def _child(
    tests: list[str], limits: dict[str, float], mutant: MutantCode | None, write: int
) -> None:
    """In the forked child: never returns."""
    status = 3
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.setpgid(0, 0)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        if mutant is not None:
            install(*mutant)
        recorder = _FirstFailure()
        args = ["-x", "-q", "-p", "no:cacheprovider", "--no-header", "-W", "ignore", *tests]
        code = int(pytest.main(args, plugins=[recorder, _Watchdog(limits, write)]))
        os.write(write, json.dumps({"exit": code, "failed": recorder.nodeid}).encode())
        status = 0
    except BaseException as error:  # report anything, then die quietly
        with contextlib.suppress(BaseException):
            os.write(write, json.dumps({"exit": -1, "failed": repr(error)}).encode())
    finally:
        os._exit(status)


@dataclass(frozen=True, slots=True)
class Limits:
    """Time-outs from each test's time in the coverage pass (which traced every line, so
    it ran slower than the mutants' runs)."""

    durations: dict[str, float]
    factor: float = 5.0  # a test's limit: this times its time, plus
    floor: float = 5.0  # seconds
    run_floor: float = 10.0  # the whole run's limit: this plus its tests' limits

    def test(self, nodeid: str) -> float:
        return self.floor + self.factor * self.durations.get(nodeid, 1.0)

    def run(self, tests: list[str]) -> float:
        return self.run_floor + sum(self.test(t) for t in tests)


def run_batched(tests: list[str], limits: Limits, mutant: MutantCode | None) -> Outcome:
    """The fastest tests first, then (if the mutant survived them) the others."""
    if not tests:
        return Outcome("no_tests", 0.0, "no unit test covers the changed lines")
    first = run(tests[:FIRST_BATCH], limits, mutant)
    if first.status != "survived" or len(tests) <= FIRST_BATCH:
        return first
    rest = run(tests[FIRST_BATCH:], limits, mutant)
    return Outcome(rest.status, first.seconds + rest.seconds, rest.detail)


def run(tests: list[str], limits: Limits, mutant: MutantCode | None = None) -> Outcome:
    """Run ``tests`` once, with ``mutant`` installed, and classify the result."""
    if not tests:
        return Outcome("no_tests", 0.0, "no unit test covers the changed lines")
    timeout = limits.run(tests)
    per_test = {t: limits.test(t) for t in tests}
    read, write = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        _child(tests, per_test, mutant, write)
    os.close(write)
    with contextlib.suppress(OSError):  # the child may have done it already
        os.setpgid(pid, pid)
    try:
        finished = _wait(pid, started + timeout)
        seconds = time.monotonic() - started
        report = _read(read)
    finally:
        os.close(read)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)  # leftovers of the tests, or a child timed out
        if not finished:
            os.waitpid(pid, 0)
    if not finished:
        return Outcome("timeout", seconds, f"no result within {timeout:.0f} s")
    return _classify(report, seconds)


def _wait(pid: int, deadline: float) -> bool:
    while True:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def _read(fd: int) -> dict[str, object]:
    os.set_blocking(fd, False)
    chunks = b""
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 65536):
            chunks += chunk
    try:
        report = json.loads(chunks or b"{}")
    except ValueError:
        report = {}
    return report if isinstance(report, dict) else {}


def _classify(report: dict[str, object], seconds: float) -> Outcome:
    code = report.get("exit")
    failed = str(report.get("failed") or "")
    if code == "timeout":
        return Outcome("timeout", seconds, f"{failed} overran its limit")
    if code == pytest.ExitCode.OK:
        return Outcome("survived", seconds)
    if code == pytest.ExitCode.TESTS_FAILED:
        return Outcome("killed", seconds, failed)
    if code in (
        pytest.ExitCode.INTERRUPTED,
        pytest.ExitCode.INTERNAL_ERROR,
        pytest.ExitCode.USAGE_ERROR,
    ):
        # The mutant breaks an import (a test module's, or the conftest's): caught.
        return Outcome("killed", seconds, f"pytest exit {code} {failed}".strip())
    return Outcome("error", seconds, f"pytest exit {code} {failed}".strip())
