"""The metamorphic oracle (``metamorphic.py``): every generated program gives the same
outcome in every execution shape.

    SIM_METAMORPHIC_BUDGET=S       seconds of programs (default 30)
    SIM_METAMORPHIC_SEED=N         that program only (replays a mismatch)
    SIM_METAMORPHIC_SEED_START=N   the first program's seed (default 1)
"""

from __future__ import annotations

import os

import pytest

from tests.simulation.metamorphic import (
    ONE_INVOCATION,
    PARKED,
    RICH,
    SHAPES,
    Outcome,
    RunOutcome,
    check_program,
    differences,
    explore,
    generate,
    run_in,
)

pytestmark = pytest.mark.unit


def test_every_shape_gives_the_same_outcome(capsys: pytest.CaptureFixture[str]) -> None:
    """GIVEN generated programs (the explorer's ops, made independent of turn order, and
    values of a richer domain: int-keyed dicts, tuples, frozensets, Decimal, datetimes,
    models, long texts; annotated or plain)
    WHEN each runs to its end in one invocation, parked at every step and wait, with
    values offloaded at a few bytes, and with sleeps kept as step items
    THEN every shape gives the reference's outcome, and no body that returned runs again"""
    seed = os.environ.get("SIM_METAMORPHIC_SEED")
    checked, seconds, failed = explore(
        float(os.environ.get("SIM_METAMORPHIC_BUDGET", "30")),
        int(os.environ.get("SIM_METAMORPHIC_SEED_START", "1")),
        int(seed) if seed else None,
    )
    with capsys.disabled():
        seeds = ", ".join(str(v.seed) for v in failed) or "none"
        print(
            f"\nmetamorphic: {checked} programs in {seconds:.1f} s, "
            f"{len(SHAPES)} shapes each; failing seeds: {seeds}"
        )
    if failed:
        pytest.fail(
            f"{len(failed)} of {checked} programs disagree across shapes (seeds {seeds})\n\n"
            + "\n\n".join(v.report() for v in failed[:3]),
            pytrace=False,
        )


@pytest.mark.parametrize("typed", [True, False])
@pytest.mark.parametrize("kind", ["int_keys", "tuple"])
def test_a_stateful_condition_decides_on_one_state_polled_in_process_or_parked(
    kind: str, typed: bool
) -> None:
    """GIVEN a stateful condition whose state is a dict keyed by int, or a tuple, its
    check annotated or not (plain JSON: keys come back as text, a tuple as a list), and
    an ``until`` that reads it as written (a key looked up, a tuple compared)
    WHEN it polls every second in one invocation (in-process) and parked
    THEN both decide on the same state: the same polls, the same result (an annotated
    state is met after its two polls)"""
    op = {"op": "rcond", "kind": kind, "typed": typed, "n": 1, "polls": 2, "interval": 1}
    verdict = check_program(0, (ONE_INVOCATION, PARKED), program=[op])
    assert verdict.mismatches == []
    in_process, parked = (o.runs[0] for o in verdict.outcomes)
    assert in_process.polls == parked.polls
    assert in_process.result == parked.result
    if typed:
        assert in_process.status == "SUCCEEDED"
        assert in_process.polls == (("0", 2),)


def test_a_result_that_fails_its_annotation_does_not_run_its_body_again() -> None:
    """GIVEN a step whose body returns a value its return annotation refuses, retried
    on ValueError (the error pydantic's refusal is)
    WHEN the program runs in every shape
    THEN the body, which returned, is not started again: the engine cannot store what
    it returned, which another attempt of the body does not mend"""
    op = {
        "op": "rstep",
        "kind": "tuple",
        "plain": False,
        "n": 5,
        "fails": 0,
        "tries": 3,
        "delay": 1,
        "effect": True,
        "bad": True,
    }
    verdict = check_program(0, program=[op])
    assert verdict.reruns == []
    assert verdict.mismatches == []


def test_the_generator_is_deterministic_and_makes_every_rich_op() -> None:
    """GIVEN the generator
    WHEN it makes the programs of 60 seeds twice
    THEN each seed's program is the same both times, and every rich op is among them"""
    programs = [generate(seed) for seed in range(60)]
    assert programs == [generate(seed) for seed in range(60)]
    made = {op["op"] for program in programs for op in program}
    assert set(RICH) <= made
    assert "value" not in made  # recorded values are drawn in turn order: left out


def test_one_shape_twice_gives_one_outcome() -> None:
    """GIVEN a program
    WHEN it runs twice in one shape
    THEN both outcomes are equal (ids and times left out): a mismatch between shapes is
    the shapes', not noise"""
    program = generate(7)
    first, second = run_in(PARKED, program, 7), run_in(PARKED, program, 7)
    assert first == second
    assert first.runs


def test_differences_name_the_run_and_what_differs() -> None:
    """GIVEN two outcomes whose one run ended differently
    WHEN they are compared
    THEN the difference names the shapes, the run and each field that differs"""
    run = RunOutcome("sim#1", "SUCCEEDED", "[]", "", (), (), (), (), 0, ())
    failed = RunOutcome("sim#1", "FAILED", "", "E: boom", (), (), (), (), 0, ())
    found = differences(Outcome("a", [run], [], []), Outcome("b", [failed], [], []))
    assert found == [
        "b vs a: run sim#1: status: 'FAILED' != 'SUCCEEDED'",
        "b vs a: run sim#1: result: '' != '[]'",
        "b vs a: run sim#1: error: 'E: boom' != ''",
    ]
    assert differences(Outcome("a", [run], [], []), Outcome("b", [run], [], [])) == []
