"""Results: the cache under ``.mutation/``, the equivalents file and the report table.

A cached result is reused while the mutant is the same (its module's text unchanged):
a killed or timed-out mutant stays killed, a surviving one is run again as soon as any
engine or test file changed (a new test may kill it). ``--fresh`` ignores the cache.
"""

from __future__ import annotations

import json
import tomllib
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from tests.mutation.operators import Mutant
from tests.mutation.selection import STATE

RESULTS = STATE / "results.json"
EQUIVALENTS = Path(__file__).with_name("equivalent.toml")
CAUGHT = ("killed", "timeout")


@dataclass(frozen=True, slots=True)
class Result:
    id: str
    path: str
    status: str  # killed, timeout, survived, no_tests, error
    seconds: float
    detail: str
    module_sha: str  # the mutated module's text
    context_sha: str  # every engine and test file


class ResultCache:
    def __init__(self, fresh: bool = False) -> None:
        self.results: dict[str, Result] = {}
        if not fresh and RESULTS.exists():
            try:
                raw = json.loads(RESULTS.read_text())
                self.results = {k: Result(**v) for k, v in raw.items()}
            except (ValueError, TypeError):
                self.results = {}

    def get(self, mutant_id: str, module_sha: str, context_sha: str) -> Result | None:
        result = self.results.get(mutant_id)
        if result is None or result.module_sha != module_sha:
            return None
        if result.status in CAUGHT or result.context_sha == context_sha:
            return result
        return None

    def put(self, result: Result) -> None:
        self.results[result.id] = result
        STATE.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps({k: asdict(v) for k, v in self.results.items()}))


def equivalents() -> dict[str, str]:
    """Excluded mutant ids and the reason each cannot change behaviour."""
    raw = tomllib.loads(EQUIVALENTS.read_text()) if EQUIVALENTS.exists() else {}
    out: dict[str, str] = {}
    for entry in raw.get("mutant", []):
        # One mutant (id = "...") or several with the same reason (ids = ["...", ...]).
        ids = [entry["id"]] if "id" in entry else list(entry.get("ids", []))
        if not ids or not entry.get("reason"):
            raise SystemExit(f"{EQUIVALENTS.name}: an entry needs an id (or ids) and a reason")
        for mutant_id in ids:
            out[str(mutant_id)] = str(entry["reason"])
    return out


@dataclass(slots=True)
class ModuleReport:
    path: str
    mutants: int  # in scope, equivalents included
    equivalent: int
    results: list[tuple[Mutant, Result]]

    @property
    def counts(self) -> Counter[str]:
        return Counter(r.status for _, r in self.results)

    @property
    def tried(self) -> int:
        return len(self.results)

    @property
    def score(self) -> float | None:
        if not self.results:
            return None
        caught = sum(self.counts[s] for s in CAUGHT)
        return caught / self.tried

    def row(self) -> str:
        c = self.counts
        survived = c["survived"] + c["no_tests"] + c["error"]
        score = "-" if self.score is None else f"{self.score:.0%}"
        in_play = self.mutants - self.equivalent
        return (
            f"| {self.path} | {self.tried} of {in_play} | {c['killed']} | {c['timeout']} "
            f"| {survived} | {self.equivalent} | {score} |"
        )

    def survivors(self) -> list[str]:
        lines = []
        for mutant, result in self.results:
            if result.status in CAUGHT:
                continue
            note = {"no_tests": " (no unit test runs this line)", "error": " (ERROR)"}
            lines.append(
                f"  {mutant.id}  L{mutant.line} {mutant.function} {mutant.operator}: "
                f"{mutant.describe(80)}{note.get(result.status, '')}"
                + (f" [{result.detail}]" if result.status == "error" else "")
            )
        return lines


HEADER = (
    "| module | tried | killed | timed out | survived | equivalent | score |\n"
    "|---|---|---|---|---|---|---|"
)


def table(reports: list[ModuleReport]) -> str:
    return "\n".join([HEADER, *(r.row() for r in reports)])
