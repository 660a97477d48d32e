"""What is deployed is what is tested (issue 30): this repo's stack as ``sam build`` makes it.

Each handler runs from its built folder in a bare ``python3.12`` (``-I -S -B``: the package
and the standard library, nothing of the dev virtualenv), with the environment the built
template gives it, against DynamoDB Local and moto's server. One run's whole life goes
through the built functions: started by the API, stepped by the worker, its three-day sleep
woken by the sweeper when the timer is lost, an approval answered through the API, a run
started by an EventBridge event, the deploy gate's verdict, the purge after retention.

Then the same with the SDK swapped under the package (``sdk_overlay``): the oldest boto3
that pyproject allows, the one AWS Lambda's python3.12 runtime bundles, and the newest on
PyPI today, so the range pyproject declares is the range tested.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from infra.local.deployed_stack import DeployedStack, sdk_overlay
from infra.lock import LOCK, installed, pins
from tests.conftest import StackFactory
from tests.deployed import journeys

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = (
    "WorkerFunction",
    "ApiFunction",
    "SweeperFunction",
    "EventsFunction",
    "PurgeFunction",
    "DeployHookFunction",
)
# The SDKs the flow runs on besides the locked one. The oldest is pyproject's floor; the
# runtime's is what the AWS Lambda developer guide ("Runtime-included SDK versions") lists
# for python3.12, the SDK a function uses that does not ship its own (update it when the
# guide does); None: the newest on PyPI.
OLDEST_BOTO3 = "1.34.0"
LAMBDA_RUNTIME_BOTO3 = "1.38.36"
SDKS = {"oldest": OLDEST_BOTO3, "lambda-runtime": LAMBDA_RUNTIME_BOTO3, "newest": None}
NOT_DEPLOYED = ("yaml", "pynamodb", "aws_xray_sdk", "tests", "infra", "benchmarks")


def test_pyproject_allows_the_oldest_sdk_tested() -> None:
    declared = (ROOT / "pyproject.toml").read_text()
    assert f'"boto3>={OLDEST_BOTO3.rsplit(".", 1)[0]}' in declared


def test_every_function_is_built_from_the_lock_and_nothing_else(repo_build: Path) -> None:
    """GIVEN sam build of template.yaml WHEN each function's folder is read THEN it holds
    exactly the locked distributions at their locked versions, the code it runs, and none
    of what only local work needs (the YAML reader, pynamodb, the X-Ray SDK, tests)."""
    locked = pins(LOCK.read_text())
    for function in FUNCTIONS:
        folder = repo_build / function
        assert installed(folder) == locked, function
        assert (folder / "durable" / "engine" / "engine.py").exists()
        assert (folder / "handlers" / "worker.py").exists()
        for name in NOT_DEPLOYED:
            assert not (folder / name).exists(), f"{function} ships {name}"
        # Bytecode for the runtime (durable sam build): /var/task is read-only on Lambda.
        for package in ("botocore", "durable", "pydantic"):
            assert list((folder / package).glob("__pycache__/*.cpython-312.pyc")), package


def _a_life_on(stack: DeployedStack) -> None:
    # Started by the API, stepped by the worker up to its three-day sleep.
    signup = {"user_id": "u-deployed", "email": "u@example.com"}
    run_id = journeys.start(stack, "onboarding", signup)
    assert stack.drain()  # the API handed the run to the worker
    (sleeping,) = journeys.waiting_on(stack, run_id)
    assert sleeping["kind"] == "sleep"
    assert journeys.timers_of(stack, run_id), "the worker armed no timer"
    # Three days on, the timer lost: the sweeper wakes the run and the worker ends it.
    journeys.wake_by_sweeper(stack, 3 * journeys.DAY + 180)
    done = journeys.shown(stack, run_id)
    assert done["status"] == "SUCCEEDED", done
    assert done["output"]["workspace"] == "ws-u-deployed", done
    assert done["output"]["nudge"] == "msg-nudge-u-deployed", done

    # An approval answered by an operator through the API.
    expense = {"employee": "ada", "amount": 120, "manager": "bob"}
    approval = journeys.start(stack, "expense-approval", expense)
    stack.drain()
    (callback,) = journeys.waiting_on(stack, approval)
    assert callback["kind"] == "callback"
    journeys.answer(stack, approval, "manager-approval", "bob")
    stack.drain()
    paid = journeys.shown(stack, approval)
    assert paid["status"] == "SUCCEEDED" and paid["output"]["approved_by"] == "bob", paid

    # An answer over the offload size: the built API puts it in the bucket, the built
    # worker reads it back from there, and the read API shows the value itself.
    large = journeys.start(stack, "expense-approval", expense)
    stack.drain()
    signature = "b" * (100 * 1024)
    journeys.answer(stack, large, "manager-approval", signature)
    stack.drain()
    assert journeys.shown(stack, large)["output"]["approved_by"] == signature
    assert len(journeys.payloads_of(stack, large)) == 2  # the answer, and the run's result

    # A run started by an EventBridge event, waiting for its approval.
    evented = journeys.start_by_event(stack, "expense-approval", expense, "com.example.orders")
    stack.drain()
    assert journeys.waiting_on(stack, evented)

    # The deploy gate: the same code replays the run in flight, so it lets traffic through.
    verdict = journeys.deploy_gate(stack)
    assert verdict["status"] == "Succeeded", verdict

    # Retention over: TTL and the purge leave nothing of the finished runs.
    journeys.purge(stack, run_id, retention_days=30)
    journeys.purge(stack, large, retention_days=0)


def test_a_run_lives_its_whole_life_in_the_built_functions(
    repo_build: Path, deployed_stacks: StackFactory
) -> None:
    stack = deployed_stacks(repo_build)
    _a_life_on(stack)
    for function in FUNCTIONS:
        assert stack.cold_starts.get(function), f"{function} was never invoked"
    imports = {f: round(boxes[0].init_ms) for f, boxes in stack.cold_starts.items()}
    print(f"\nhandler module import (Lambda's init), ms: {imports}")


@pytest.mark.parametrize("sdk", list(SDKS))
def test_the_same_life_on_every_sdk_pyproject_allows(
    sdk: str, repo_build: Path, deployed_stacks: StackFactory, python312: str, tmp_path: Path
) -> None:
    """The package with another boto3 and botocore first on its path (as a function that
    uses the runtime's SDK, or a project that pins another, would run)."""
    overlay = sdk_overlay(tmp_path / "sdk", SDKS[sdk], python312)
    wanted = SDKS[sdk] or installed(overlay)["boto3"]
    # What a function's interpreter imports with the overlay first on its path.
    probe = subprocess.run(
        [
            python312,
            "-I",
            "-S",
            "-c",
            "import sys; sys.path[:0] = sys.argv[1:]; import boto3, "
            "botocore; print(boto3.__version__, botocore.__version__)",
            str(overlay),
            str(repo_build / "WorkerFunction"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    boto3_version, botocore_version = probe.stdout.split()
    assert boto3_version == wanted
    assert botocore_version == wanted or SDKS[sdk] is None
    print(f"\n{sdk}: boto3 {boto3_version}, botocore {botocore_version}")
    _a_life_on(deployed_stacks(repo_build, overlay=overlay))
