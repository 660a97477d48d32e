"""Which unit tests cover which line: the coverage pass and its cache.

The pass runs the unit tier (``pytest -m unit``: no sockets) under ``tests.mutation.trace``
and keeps, per test file, the lines each test ran. It is redone for a test file whose text
changed, and for all of them when anything they share changed (the engine, the test
helpers and fixtures, the handlers and examples). A mutant then runs the tests covering
the lines it changes, fastest first; a mutant outside any function (a module constant, a
dataclass default) or on a line run at import runs every test covering its module.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from tests.mutation.operators import Mutant
from tests.mutation.trace import INCLUDE_ENV, OUT_ENV

ROOT = Path(__file__).resolve().parents[2]
STATE = ROOT / ".mutation"
CACHE = STATE / "coverage.json"
_VERSION = 1
_NOT_UNIT = ("tests/integration/", "tests/e2e/", "tests/localstack/", "tests/mutation/")
_SHARED_DIRS = ("durable", "handlers", "examples", "tests")


def _sha(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(path.relative_to(ROOT).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def test_files() -> list[Path]:
    """The test modules that may hold unit-tier tests."""
    found = sorted((ROOT / "tests").rglob("test_*.py"))
    return [p for p in found if not p.relative_to(ROOT).as_posix().startswith(_NOT_UNIT)]


def shared_sha() -> str:
    """Everything a test file's coverage depends on besides the file itself."""
    files = [ROOT / "pyproject.toml"]
    for name in _SHARED_DIRS:
        for path in (ROOT / name).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if path.name.startswith("test_") or rel.startswith("tests/mutation/"):
                continue
            files.append(path)
    return _sha(files)


class TestInfo(TypedDict):
    duration: float
    passed: bool


class FileEntry(TypedDict):
    sha: str
    tests: dict[str, TestInfo]
    lines: dict[str, dict[str, list[str]]]  # module -> line -> node ids


class Trace(TypedDict):
    tests: dict[str, TestInfo]
    lines: dict[str, dict[str, list[str]]]  # module -> line -> contexts ("" = import)


@dataclass(slots=True)
class CoverageMap:
    """Per test file: each test's duration and outcome, and the lines each test ran."""

    shared: str = ""
    files: dict[str, FileEntry] = field(default_factory=dict)
    import_lines: dict[str, list[int]] = field(default_factory=dict)

    # --- the cache ----------------------------------------------------------------

    @classmethod
    def load(cls) -> CoverageMap:
        try:
            raw = json.loads(CACHE.read_text())
        except (OSError, ValueError):
            return cls()
        if raw.get("version") != _VERSION:
            return cls()
        return cls(raw["shared"], raw["files"], raw["import_lines"])

    def save(self) -> None:
        STATE.mkdir(exist_ok=True)
        data = {
            "version": _VERSION,
            "shared": self.shared,
            "files": self.files,
            "import_lines": self.import_lines,
        }
        CACHE.write_text(json.dumps(data))

    # --- refreshing ---------------------------------------------------------------

    def refresh(self, modules: list[str], *, log: Path) -> None:
        """Redo the coverage pass for stale test files (all of them if shared code changed)."""
        shared = shared_sha()
        if shared != self.shared:
            self.files, self.import_lines, self.shared = {}, {}, shared
        current = {p.relative_to(ROOT).as_posix(): p for p in test_files()}
        for gone in set(self.files) - set(current):
            del self.files[gone]
        stale = [
            rel
            for rel, path in current.items()
            if rel not in self.files or self.files[rel].get("sha") != _sha([path])
        ]
        if not stale:
            return
        print(f"coverage pass: {len(stale)} test file(s) (log: {log.relative_to(ROOT)})")
        trace = _trace(stale, modules, log)
        for rel in stale:
            self.files[rel] = {"sha": _sha([current[rel]]), "tests": {}, "lines": {}}
        for nodeid, info in trace["tests"].items():
            entry = self.files.get(nodeid.split("::", 1)[0])
            if entry is not None:
                entry["tests"][nodeid] = info
        for module, by_line in trace["lines"].items():
            at_import = set(self.import_lines.get(module, []))
            for line, contexts in by_line.items():
                for context in contexts:
                    if not context:
                        at_import.add(int(line))
                        continue
                    entry = self.files.get(context.split("::", 1)[0])
                    if entry is not None:
                        lines = entry["lines"].setdefault(module, {})
                        lines.setdefault(line, []).append(context)
            self.import_lines[module] = sorted(at_import)
        self.save()

    # --- selection ----------------------------------------------------------------

    def durations(self) -> dict[str, float]:
        """Passing unit tests and their durations in the coverage pass."""
        return {
            nodeid: info["duration"]
            for entry in self.files.values()
            for nodeid, info in entry["tests"].items()
            if info["passed"]
        }

    def failing(self) -> list[str]:
        return sorted(
            nodeid
            for entry in self.files.values()
            for nodeid, info in entry["tests"].items()
            if not info["passed"]
        )

    def tests_of_lines(self, module: str, lines: range | None) -> set[str]:
        """Tests that ran any of ``lines`` of ``module`` (any line when None)."""
        wanted = None if lines is None else {str(n) for n in lines}
        found: set[str] = set()
        for entry in self.files.values():
            for line, nodeids in entry["lines"].get(module, {}).items():
                if wanted is None or line in wanted:
                    found.update(nodeids)
        return found

    def select(self, mutant: Mutant, durations: dict[str, float]) -> list[str]:
        """The passing tests to run against ``mutant``, fastest first."""
        lines = range(mutant.line, mutant.end_line + 1)
        at_import = set(self.import_lines.get(mutant.path, [])) & set(lines)
        if not mutant.in_function or at_import:
            chosen = self.tests_of_lines(mutant.path, None)
        else:
            chosen = self.tests_of_lines(mutant.path, lines)
        return sorted((t for t in chosen if t in durations), key=lambda t: (durations[t], t))


def _trace(files: list[str], modules: list[str], log: Path) -> Trace:
    out = STATE / "trace.json"
    out.unlink(missing_ok=True)
    env = {
        **os.environ,
        OUT_ENV: str(out),
        INCLUDE_ENV: os.pathsep.join(str(ROOT / m) for m in modules),
    }
    command = [sys.executable, "-m", "pytest", "-m", "unit", "-q", "-p", "no:cacheprovider"]
    command += ["-p", "tests.mutation.trace", *files]
    with log.open("w") as sink:
        done = subprocess.run(
            command, check=False, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT
        )
    if done.returncode not in (0, 1, 5) or not out.exists():
        raise SystemExit(f"the coverage pass failed (exit {done.returncode}); see {log}")
    raw: Trace = json.loads(out.read_text())
    return raw
