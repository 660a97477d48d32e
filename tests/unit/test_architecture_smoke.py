"""Issue 46, item 5: the functions' CPU is a template parameter that ``durable sam build
--architecture`` sets (and tells deploy/lambda/Makefile), and a project made by ``durable
init`` has ``make smoke``: a build for this machine run handler by handler. The real build
and run are in the project tier (tests/project); here the plumbing and the smoke's checks
with a stand-in stack."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from durable.adapters.schema import load_template
from durable.local import sam, smoke
from durable.scaffold import init

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("where", ["repo", "project"])
def test_every_function_runs_on_the_architecture_parameter(where: str, tmp_path: Path) -> None:
    if where == "repo":
        template = load_template(ROOT / "template.yaml")
    else:
        init(tmp_path / "shop", requirement="durable-lambda==0.1.0")
        template = load_template(tmp_path / "shop" / "template.yaml")
    parameter = template["Parameters"]["Architecture"]
    assert parameter["Default"] == "arm64"
    assert parameter["AllowedValues"] == ["arm64", "x86_64"]
    assert template["Globals"]["Function"]["Architectures"] == [{"Ref": "Architecture"}]
    functions = [
        r for r in template["Resources"].values() if r["Type"] == "AWS::Serverless::Function"
    ]
    assert len(functions) == 6
    assert all("Architectures" not in f["Properties"] for f in functions)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (
            ["build", "--architecture", "x86_64"],
            ["build", "--parameter-overrides", "Architecture=x86_64"],
        ),
        (
            ["build", "--architecture=x86_64", "--parameter-overrides", "Stage=qa", "-b", "out"],
            ["build", "--parameter-overrides", "Architecture=x86_64", "Stage=qa", "-b", "out"],
        ),
    ],
)
def test_build_architecture_becomes_the_parameter(given: list[str], expected: list[str]) -> None:
    assert sam.with_architecture(given) == (expected, "x86_64")


def test_an_override_given_to_sam_is_the_architecture_too() -> None:
    args = ["build", "--parameter-overrides", "Stage=qa Architecture=x86_64"]
    assert sam.with_architecture(args) == (args, "x86_64")
    assert sam.with_architecture(["build"]) == (["build"], None)
    assert sam.with_architecture(["deploy", "--architecture", "x"]) == (
        ["deploy", "--architecture", "x"],
        None,
    )
    with pytest.raises(sam.SamError, match="arm64 and x86_64"):
        sam.with_architecture(["build", "--architecture", "sparc"])


def test_durable_sam_build_architecture_tells_sam_and_the_makefile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SAM gets ``Architecture=x86_64`` (every function's ``Architectures``) and the
    makefile build ``DURABLE_ARCHITECTURE=x86_64`` (its wheels), which SAM does not pass."""
    monkeypatch.chdir(tmp_path)
    ran: list[tuple[list[str], dict[str, str]]] = []

    def fake_run(command: list[str], env: dict[str, str], check: bool) -> Any:
        ran.append((command, env))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(sam, "ensure_sam", lambda: Path("/opt/sam/bin/sam"))
    monkeypatch.setattr(sam, "find_runtime_python", lambda: Path("/opt/py/bin/python3.12"))
    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.delenv("DURABLE_ARCHITECTURE", raising=False)
    assert sam.run(["build", "--architecture", "x86_64"]) == 0
    ((command, env),) = ran
    assert command[1:] == ["build", "--parameter-overrides", "Architecture=x86_64"]
    assert env["DURABLE_ARCHITECTURE"] == "x86_64"


class FakeStack:
    """The smoke's view of a DeployedStack: the functions answer, or one raises."""

    def __init__(self, failing: str | None = None) -> None:
        names = ["ApiFunction", "WorkerFunction", "SweeperFunction", "PurgeFunction"]
        names += ["EventsFunction", "DeployHookFunction"]
        self.resources: dict[str, Any] = {n: {"Type": "AWS::Serverless::Function"} for n in names}
        self.resources["LedgerTable"] = {"Type": "AWS::DynamoDB::Table"}
        self.failing = failing
        self.sent: list[tuple[str, Any]] = []
        self.started: list[str] = []
        self.closed = False

    def _answer(self, function: str, event: Any) -> Any:
        self.sent.append((function, event))
        if function == self.failing:
            raise RuntimeError(f"{function}: ImportError: pydantic_core._pydantic_core")
        return {}

    def sandbox(self, function: str) -> None:
        self.started.append(function)
        if function == self.failing:
            raise RuntimeError(f"{function}: ImportError")

    def invoke(self, function: str, event: Any) -> Any:
        return self._answer(function, event)

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        self._answer("ApiFunction", {"method": method, "path": path, "body": body})
        if method == "POST":
            return 202, {"run_id": "R" * 26}
        if path.startswith("/runs/"):
            return 200, {"status": "WAITING"}
        if path == "/workflows":
            return 200, {"workflows": []}
        # As the API answers: runs are listed per workflow (or by attention) only; the
        # smoke's GET /runs failed on the real stack, never here, until this said so.
        if path.startswith("/runs") and "workflow=" not in path and "attention" not in path:
            return 400, {"error": {"type": "MissingFilter", "field": "workflow"}}
        return 200, {"runs": []}

    def sweep(self) -> Any:
        return self._answer("SweeperFunction", {"detail-type": "Scheduled Event"})

    def drain(self, limit: int = 100) -> list[Any]:
        return [self._answer("WorkerFunction", {"run_id": "R" * 26, "reason": "start"})]

    def close(self) -> None:
        self.closed = True


def test_smoke_sends_each_function_an_event_and_says_which_failed() -> None:
    said: list[str] = []
    checks = smoke.check(FakeStack(), say=said.append)
    assert {c.function for c in checks} == {
        "ApiFunction",
        "WorkerFunction",
        "SweeperFunction",
        "PurgeFunction",
        "EventsFunction",
        "DeployHookFunction",
    }
    assert all(c.ok for c in checks), said
    stack = FakeStack()
    smoke.check(stack, say=said.append)
    worker = [e for f, e in stack.sent if f == "WorkerFunction"]
    assert worker == [{"run_id": smoke.NO_RUN, "reason": "smoke"}]  # the worker's event shape
    assert set(stack.started) == {"EventsFunction", "DeployHookFunction"}
    said.clear()
    broken = smoke.check(FakeStack(failing="WorkerFunction"), say=said.append)
    assert [c.function for c in broken if not c.ok] == ["WorkerFunction"]
    assert any(line.startswith("✗ WorkerFunction") for line in said), said
    assert any("ImportError" in line for line in said), said


def test_smoke_runs_a_workflow_through_the_built_api_and_worker() -> None:
    stack = FakeStack()
    checks = smoke.check(stack, "greet", {"name": "Ada"}, say=lambda _: None)
    assert checks[-1].ok and checks[-1].detail == f"{'R' * 26} WAITING"
    assert (
        "ApiFunction",
        {"method": "POST", "path": "/workflows/greet/runs", "body": {"name": "Ada"}},
    ) in stack.sent


def test_smoke_builds_for_this_machine_and_fails_when_a_handler_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from durable.local import deployed

    built: list[list[str]] = []

    def fake_build(args: list[str]) -> int:
        built.append(list(args))
        return 0

    monkeypatch.setattr(sam, "run", fake_build)
    monkeypatch.setattr(sam, "find_runtime_python", lambda: Path("/opt/py/bin/python3.12"))
    monkeypatch.setattr(deployed, "host_architecture", lambda: "x86_64")
    stacks = [FakeStack(failing="PurgeFunction")]
    made: list[tuple[Path, str, str]] = []

    def fake_stack(build: Path, dynamodb: str, moto: str, python: str, work: Path) -> Any:
        made.append((build, dynamodb, python))
        return stacks[0]

    class Servers:
        def __init__(self, dev: Any) -> None:
            self.dev = dev

        def __enter__(self) -> tuple[str, str]:
            return (self.dev or {}).get("dynamodb", "http://moto"), "http://moto"

        def __exit__(self, *_: object) -> None:
            return None

    monkeypatch.setattr(smoke, "_stack", fake_stack)
    monkeypatch.setattr(smoke, "_servers", Servers)
    (tmp_path / ".durable").mkdir()
    (tmp_path / ".durable" / "dev.json").write_text('{"dynamodb": "http://127.0.0.1:8000"}')
    said: list[str] = []
    code = smoke.run(tmp_path, tmp_path / "b", say=said.append)
    assert code == 1 and stacks[0].closed
    assert built == [["build", "--architecture", "x86_64", "--build-dir", str(tmp_path / "b")]]
    assert made == [(tmp_path / "b", "http://127.0.0.1:8000", "/opt/py/bin/python3.12")]
    assert "• 5 of 6 checks passed" in said[-1]


def test_the_project_has_make_smoke(tmp_path: Path) -> None:
    init(tmp_path / "shop", requirement="durable-lambda==0.1.0")
    skip = ("VIRTUAL_ENV", "VENV", "MAKELEVEL", "MAKEFLAGS", "MFLAGS")
    env = {k: v for k, v in os.environ.items() if k not in skip}
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "smoke", "WORKFLOW=greet", 'INPUT={"name": "Ada"}'],
        cwd=tmp_path / "shop",
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "-m durable.local.smoke --workflow 'greet' --input '{\"name\": \"Ada\"}'" in done.stdout


def test_smoke_hands_its_stack_the_build_folder_as_an_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``make smoke`` names the build folder relative to the project (``.aws-sam/smoke``);
    the stack runs each function in a process of its own in another folder, where that
    relative path named nothing: every handler failed with "No module named 'handlers'"
    in a real ``make smoke`` from a project made by ``durable init``."""
    from durable.local import deployed

    monkeypatch.setattr(sam, "run", lambda args: 0)
    monkeypatch.setattr(sam, "find_runtime_python", lambda: Path("/opt/py/bin/python3.12"))
    monkeypatch.setattr(deployed, "host_architecture", lambda: "x86_64")
    made: list[Path] = []

    def fake_stack(build: Path, dynamodb: str, moto: str, python: str, work: Path) -> Any:
        made.append(build)
        return FakeStack()

    class Servers:
        def __init__(self, dev: Any) -> None:
            pass

        def __enter__(self) -> tuple[str, str]:
            return "http://moto", "http://moto"

        def __exit__(self, *_: object) -> None:
            return None

    monkeypatch.setattr(smoke, "_stack", fake_stack)
    monkeypatch.setattr(smoke, "_servers", Servers)
    monkeypatch.chdir(tmp_path)
    smoke.run(Path("."), smoke.BUILD_DIR, say=lambda _: None)
    assert made == [tmp_path / ".aws-sam" / "smoke"]
