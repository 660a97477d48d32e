"""``python -m tests.mutation``: mutate the engine core and report what the unit tests catch.

    python -m tests.mutation --module durable/core/retry.py      # one module, in minutes
    python -m tests.mutation                                 # every target, one at a time
    python -m tests.mutation --module retry --sample 40      # a budget: 40 random mutants
    python -m tests.mutation --module retry --list           # the mutants and their ids
    python -m tests.mutation --show retry-1a2b3c4d           # one mutant, before and after
    python -m tests.mutation --module steps --replace 'return None  #' 'return ""  #' \
        --only test_pins_steps                               # a hand-made mutant

Runs one mutant at a time (one worker): the machine's other work keeps its cores.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import signal
import sys
import time

from tests.mutation import operators, runner
from tests.mutation.results import (
    ModuleReport,
    Result,
    ResultCache,
    equivalents,
    table,
)
from tests.mutation.selection import ROOT, STATE, CoverageMap, shared_sha, test_files
from tests.mutation.targets import TARGETS, Target, find


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation", description=__doc__)
    parser.add_argument("--module", action="append", default=[], help="a target (repeatable)")
    parser.add_argument("--sample", type=int, help="try at most N mutants per module")
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    parser.add_argument("--id", action="append", default=[], help="run only these mutants")
    parser.add_argument(
        "--only",
        metavar="TEXT",
        help="run only the selected tests whose node id contains TEXT (to check that a new "
        "test kills a mutant by itself); results are not cached",
    )
    parser.add_argument(
        "--replace",
        nargs=2,
        metavar=("OLD", "NEW"),
        help="run a hand-made mutant instead: the one --module with its single occurrence "
        "of the text OLD replaced by NEW (for faults the operators do not make)",
    )
    parser.add_argument("--fresh", action="store_true", help="ignore cached results")
    parser.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    parser.add_argument("--show", metavar="ID", help="print one mutant")
    parser.add_argument(
        "--timeout-factor",
        type=float,
        default=5.0,
        help="a test's time-out under a mutant: this times its time in the coverage pass, "
        "plus --timeout-floor (default 5)",
    )
    parser.add_argument("--timeout-floor", type=float, default=5.0, help="seconds (5)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run")
    parser.add_argument(
        "--fail-under",
        type=float,
        metavar="PERCENT",
        help="exit 1 when a module's score is under PERCENT (a gate for CI or a hook)",
    )
    return parser.parse_args(argv)


def _mutants(target: Target) -> tuple[str, list[operators.Mutant]]:
    source = (ROOT / target.path).read_text()
    return source, operators.generate(target.path, source, target.covers)


def _show(mutant_id: str) -> int:
    for target in TARGETS:
        source, mutants = _mutants(target)
        for m in mutants:
            if m.id == mutant_id:
                lines = source.splitlines()[m.line - 1 : m.end_line]
                print(f"{m.id}: {m.path}:{m.line} in {m.function} ({m.operator})")
                print("\n".join(f"- {line}" for line in lines))
                print(f"+ {m.replacement}   (replaces: {m.original})")
                return 0
    print(f"no mutant {mutant_id} in the current sources", file=sys.stderr)
    return 1


def _context_sha() -> str:
    digest = hashlib.sha256(shared_sha().encode())
    for path in test_files():
        digest.update(path.read_bytes())
    return digest.hexdigest()


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    os.chdir(ROOT)
    # Terminated: unwind, so the runner kills the running child's process group.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.show:
        return _show(args.show)
    targets = [find(name) for name in args.module] if args.module else list(TARGETS)
    excluded = equivalents()
    if args.list:
        for target in targets:
            for m in _mutants(target)[1]:
                mark = "  [equivalent]" if m.id in excluded else ""
                print(
                    f"{m.id}  L{m.line:<4} {m.function:<34} {m.operator:<12} {m.describe()}{mark}"
                )
        return 0

    STATE.mkdir(exist_ok=True)
    coverage = CoverageMap.load()
    coverage.refresh([t.path for t in TARGETS], log=STATE / "coverage.log")
    durations = coverage.durations()
    if coverage.failing():
        print(f"not used (failed in the coverage pass): {', '.join(coverage.failing())}")
    runner.preload()
    if args.replace:
        return _hand_made(targets, args, coverage, durations)
    cache = ResultCache(fresh=args.fresh)
    context = _context_sha()
    reports: list[ModuleReport] = []
    for target in targets:
        reports.append(_run_module(target, args, coverage, durations, cache, context, excluded))
    print()
    print(table(reports))
    (STATE / "report.md").write_text(table(reports) + "\n")
    known = {m.id for t in TARGETS for m in _mutants(t)[1]}
    stale = sorted(set(excluded) - known)
    if stale:
        print(f"\nequivalent.toml names mutants that no longer exist: {', '.join(stale)}")
    if args.fail_under is not None:
        low = [r.path for r in reports if r.score is not None and r.score * 100 < args.fail_under]
        if low:
            print(f"\nunder {args.fail_under:g}%: {', '.join(low)}")
            return 1
    return 0


def _run_module(
    target: Target,
    args: argparse.Namespace,
    coverage: CoverageMap,
    durations: dict[str, float],
    cache: ResultCache,
    context: str,
    excluded: dict[str, str],
) -> ModuleReport:
    source, mutants = _mutants(target)
    module_sha = hashlib.sha256(source.encode()).hexdigest()
    candidates = [m for m in mutants if m.id not in excluded]
    if args.id:
        candidates = [m for m in candidates if m.id in args.id]
    if args.sample is not None and args.sample < len(candidates):
        picked = set(random.Random(args.seed).sample(range(len(candidates)), args.sample))
        candidates = [m for i, m in enumerate(candidates) if i in picked]
    print(f"\n== {target.path}: {len(mutants)} mutants, {len(candidates)} to try ==")
    limits = runner.Limits(durations, args.timeout_factor, args.timeout_floor)
    if not (args.no_baseline or args.only or args.id):
        _baseline(target, coverage, limits)
    equivalent = sum(1 for m in mutants if m.id in excluded)
    report = ModuleReport(target.path, len(mutants), equivalent, [])
    for n, mutant in enumerate(candidates, 1):
        result = None if args.only else cache.get(mutant.id, module_sha, context)
        cached = result is not None
        if result is None:
            tests = coverage.select(mutant, durations)
            if args.only:
                tests = [t for t in tests if args.only in t]
            code = operators.compile_mutant(source, mutant, str(ROOT / target.path))
            origin = str(ROOT / target.path)
            outcome = runner.run_batched(tests, limits, (target.module, code, origin))
            result = Result(
                mutant.id,
                target.path,
                outcome.status,
                round(outcome.seconds, 2),
                outcome.detail,
                module_sha,
                context,
            )
            if not args.only:
                cache.put(result)
        report.results.append((mutant, result))
        flag = " (cached)" if cached else f" {result.seconds:.1f}s"
        print(
            f"[{n}/{len(candidates)}] {mutant.id} L{mutant.line} {mutant.operator}: "
            f"{result.status}{flag}",
            flush=True,
        )
    print(table([report]))
    survivors = report.survivors()
    if survivors:
        print("survivors:")
        print("\n".join(survivors))
    return report


def _hand_made(
    targets: list[Target],
    args: argparse.Namespace,
    coverage: CoverageMap,
    durations: dict[str, float],
) -> int:
    """Run one textual mutant of one module against its tests (or those matching --only)."""
    if len(targets) != 1:
        raise SystemExit("--replace needs exactly one --module")
    target, (old, new) = targets[0], args.replace
    source = (ROOT / target.path).read_text()
    if source.count(old) != 1:
        raise SystemExit(f"{old!r} occurs {source.count(old)} times in {target.path}, not once")
    origin = str(ROOT / target.path)
    code = compile(source.replace(old, new), origin, "exec", dont_inherit=True)
    tests = [t for t in coverage.tests_of_lines(target.path, None) if t in durations]
    if args.only:
        tests = [t for t in tests if args.only in t]
    tests.sort(key=lambda t: (durations[t], t))
    limits = runner.Limits(durations, args.timeout_factor, args.timeout_floor)
    outcome = runner.run_batched(tests, limits, (target.module, code, origin))
    print(f"{target.path}: {old!r} -> {new!r}: {outcome.status} by {len(tests)} tests")
    if outcome.detail:
        print(f"  {outcome.detail}")
    return 0 if outcome.status in ("killed", "timeout") else 1


def _baseline(target: Target, coverage: CoverageMap, limits: runner.Limits) -> None:
    """The module's tests must pass unmutated, in the runner, in the order it uses."""
    durations = limits.durations
    tests = sorted(
        (t for t in coverage.tests_of_lines(target.path, None) if t in durations),
        key=lambda t: (durations[t], t),
    )
    started = time.monotonic()
    outcome = runner.run(tests, limits)
    if outcome.status != "survived":
        raise SystemExit(
            f"{target.path}: its {len(tests)} tests do not pass unmutated in the runner "
            f"({outcome.status}: {outcome.detail}); fix that first"
        )
    print(f"baseline: {len(tests)} tests pass unmutated in {time.monotonic() - started:.1f}s")


if __name__ == "__main__":
    sys.exit(main())
