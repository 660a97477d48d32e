"""A user's own project, end to end, from the built wheel (issue 14).

What a new team does, in a temporary folder far from this checkout: build the wheel,
``pip install`` it into a fresh virtualenv, ``durable init`` a project, run its tests
(``make test``), start the whole stack (``make dev``), start a run and approve it with the
CLI, see it finish, stop the stack with Ctrl-C (every process it started ends), walk
docs/tutorial-nightly-import.md under ``make dev`` with the tutorial's app copied in, then
``make validate`` and ``make build`` (the SAM CLI, installed by the project's own
tooling, with ``python3.12`` found), and last the built functions run as Lambda runs them
(``infra.local.deployed_stack``). Nothing the project runs imports this checkout: every
command is the installed one, so a file missing from the wheel fails this test.

Slow (a wheel, a virtualenv, a SAM build): its own tier, ``make test-project``. Each step's
wall time is printed (``-s``) for the issue note.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from durable.local.harness import with_default_sigint
from infra.lock import LOCK, installed, pins
from tests.conftest import StackFactory
from tests.deployed import journeys
from tests.project import tutorial

ROOT = Path(__file__).resolve().parents[2]
PORT_ENV = "DURABLE_PROJECT_TEST_PORT"
# The team's own app, written after durable init (issue 33's user): a nightly import that
# starts one onboarding per customer and attaches to one still running, a partner sync
# that succeeds on its third attempt an hour apart, and a sync that fails at once.
OWN_APP = """

# --- The team's own workflows, written after `durable init` ---------------------------

from durable import Concurrency, RetryPolicy  # noqa: E402


class Customer(BaseModel):
    id: str


@app.step(name="load_customers")
def load_customers() -> list[str]:
    return ["c-000", "c-001"]


@app.workflow(name="onboard-customer", concurrency=Concurrency(1, key="id"))
def onboard_customer(ctx: Context, customer: Customer) -> str:
    ctx.sleep(timedelta(days=3))  # the welcome series runs for three days
    return f"onboarded {customer.id}"


@app.workflow(name="nightly-import", schedule="cron(0 2 * * ? *)")
def nightly_import(ctx: Context) -> list[str]:
    # One onboarding per customer: a customer still onboarding from an earlier night
    # keeps that run (attach) instead of failing tonight's import.
    handles = [
        ctx.start_child(onboard_customer, Customer(id=c), id=f"onboard-{c}", if_running="attach")
        for c in load_customers()
    ]
    return [h.run_id for h in handles]


PARTNER = {"calls": 0}


@app.step(
    name="call_partner",
    retry=RetryPolicy(max_attempts=3, initial_delay=timedelta(hours=1), jitter="none"),
)
def call_partner() -> str:
    PARTNER["calls"] += 1
    if PARTNER["calls"] < 3:
        raise ConnectionError("partner API is down")
    return "synced"


@app.workflow(name="partner-sync")
def partner_sync(ctx: Context) -> str:
    return call_partner()


@app.workflow(name="broken-sync")
def broken_sync(ctx: Context) -> str:
    raise ValueError("the field mapping is wrong")  # fails at once: needs a person


# Issue 36: an async step, a codec for a type pydantic does not know, a large value.
import asyncio  # noqa: E402
import json  # noqa: E402
from decimal import Decimal  # noqa: E402


class Money:  # a billing library's class: no pydantic schema
    def __init__(self, amount: Decimal) -> None:
        self.amount = amount


class MoneyCodec:
    def serialize(self, value: Money) -> str:
        return json.dumps(str(value.amount))

    def deserialize(self, data: str) -> Money:
        return Money(Decimal(json.loads(data)))


@app.step(name="fetch_prices")
async def fetch_prices(count: int) -> list[str]:
    await asyncio.sleep(0)  # an async HTTP client in real life
    return [f"{i:06d}," + "p" * 100 for i in range(count)]  # 600 rows: about 66 KB


def total_of(rows: list[str]) -> Money:
    return Money(Decimal("0.10") * len(rows))


@app.workflow(name="price-report")
def price_report(ctx: Context, count: int) -> str:
    rows = ctx.step(fetch_prices, count)
    total = ctx.step(total_of, rows, serdes=MoneyCodec())
    ctx.sleep(timedelta(hours=1))  # the replay reads the rows back from the payload store
    return f"{len(rows)} rows, {total.amount}"
"""
# ... and its tests, with the kit: schedules fired, time skipped (`make test` runs them).
OWN_TESTS = '''"""The team's own workflows, tested with the kit: time skipped, schedules fired."""

from datetime import UTC, datetime

from durable.testing import FakeClock, LocalRunner, RunNotSucceeded

from shop.workflows import PARTNER, app


def test_the_second_night_attaches_to_an_onboarding_still_running() -> None:
    runner = LocalRunner(app, clock=FakeClock(datetime(2026, 1, 1, 1, tzinfo=UTC)))
    first = runner.fire_schedule("nightly-import", at=datetime(2026, 1, 1, 2, tzinfo=UTC))
    second = runner.fire_schedule("nightly-import", at=datetime(2026, 1, 2, 2, tzinfo=UTC))
    assert first.result == second.result == "started"
    assert first.run_id is not None and second.run_id is not None
    tonight, last_night = runner.result(second.run_id), runner.result(first.run_id)
    assert tonight == last_night  # the same onboarding runs, attached, not failed
    runner.advance(days=3)
    assert [runner.result(r) for r in tonight] == ["onboarded c-000", "onboarded c-001"]


def test_one_advance_runs_three_attempts_an_hour_apart() -> None:
    PARTNER["calls"] = 0
    runner = LocalRunner(app)
    run_id = runner.start("partner-sync").run_id
    runner.advance(hours=3)
    assert runner.result(run_id) == "synced" and PARTNER["calls"] == 3


def test_an_async_step_a_codec_and_a_large_value_from_the_kit() -> None:
    runner = LocalRunner(app)
    run_id = runner.start("price-report", 600).run_id
    runner.advance(hours=2)
    assert runner.result(run_id) == "600 rows, 60.00"
    assert runner.call_count("payloads.put") >= 1  # the rows, over 64 KiB, were kept aside


def test_a_broken_sync_fails_with_its_error() -> None:
    runner = LocalRunner(app)
    run_id = runner.start("broken-sync").run_id
    runner.run_until_idle()
    try:
        runner.result(run_id)
    except RunNotSucceeded as failed:
        assert "field mapping" in str(failed)
    else:
        raise AssertionError("broken-sync succeeded")
'''
# The project's own additions (stack.yaml): a policy and a variable for the worker alone.
OWN_STACK = """\
functions:
  worker:
    policies:
      - Sid: SendWelcomeEmail
        Effect: Allow
        Action: ses:SendEmail
        Resource:
          Fn::Sub: arn:${AWS::Partition}:ses:${AWS::Region}:${AWS::AccountId}:identity/example.com
    environment:
      WELCOME_FROM: hello@example.com
"""


class Steps:
    """Runs commands, failing with their output; records each step's wall time."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.times: list[tuple[str, float]] = []

    def run(self, label: str, cmd: list[str], cwd: Path, timeout: float = 900) -> str:
        began = time.perf_counter()
        done = subprocess.run(
            cmd, cwd=cwd, env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )
        self.times.append((label, time.perf_counter() - began))
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"{label}: {' '.join(cmd)} exited {done.returncode}\n{output}"
        return output

    def report(self) -> None:
        print("\n== a user's project, end to end: wall times ==")
        for label, seconds in self.times:
            shown = (
                f"  {label}" if label.startswith("durable ") and label != "durable init" else label
            )
            print(f"  {shown:<34} {seconds:7.1f} s")
        # The CLI calls made while `make dev` ran are inside its figure: not added twice.
        total = sum(
            s
            for label, s in self.times
            if not label.startswith("durable ") or label == "durable init"
        )
        print(f"  {'total':<34} {total:7.1f} s")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("own-project")


def _clean_env(workspace: Path) -> dict[str, str]:
    """The environment of a user's shell: nothing of this checkout's venv or test setup."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DURABLE_", "AWS_", "PYTEST", "VIRTUAL_ENV", "PYTHON"))
    }
    venv_bin = str(ROOT / ".venv" / "bin")
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != venv_bin)
    # The install caches stay shared with the rest of CI (DynamoDB Local, the SAM CLI).
    if os.environ.get("DURABLE_LOCAL_HOME"):
        env["DURABLE_LOCAL_HOME"] = os.environ["DURABLE_LOCAL_HOME"]
    env["HOME"] = os.environ.get("HOME", str(workspace))
    return env


def _start_dev(
    project: Path, venv: Path, env: dict[str, str], app: str | None = None
) -> subprocess.Popen[str]:
    """``make dev`` in its own process group, as a terminal runs it; ``app``: another
    app than the project's own (``--app``)."""
    with socket.socket() as probe:  # a free port: 8787 may be taken on a shared machine
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dev_args = f"--port {port}" + (f" --app {app}" if app else "")
    return subprocess.Popen(
        # A terminal's foreground job: Ctrl-C interrupts it (not so under a CI runner).
        # TIME_SCALE: the scaffold's 60 leaves a person time to answer (its hour of sleep
        # takes a minute); this test answers at once and would wait that minute for nothing.
        with_default_sigint(
            ["make", "dev", f"VENV={venv}", "TIME_SCALE=600", f"DEV_ARGS={dev_args}"]
        ),
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


class Output:
    """Drains a process's output on a thread (its pipe never fills) into lines."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._drain, args=(process,), daemon=True)
        self._thread.start()

    def _drain(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()

    def wait_for(self, marker: str, timeout: float = 180) -> None:
        """Until a line contains ``marker``; fails with the output when it never comes."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not any(marker in line for line in self.lines):
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    raise AssertionError(f"`make dev` never printed {marker!r}:\n{self.text}")
                self._changed.wait(min(left, 1.0))

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def _check_deploy(steps: Steps, project: Path, durable: str, output: Output) -> None:
    """With a run waiting for its approval: the same code passes the deploy check, a
    renamed step fails it, naming the run and the position."""
    start = [durable, "start", "greet", "--input", '{"name": "Bob"}', "-q"]
    waiting = steps.run("durable start (2)", start, project).strip()
    output.wait_for(f"{waiting}  ⏸ waiting for callback approval")
    out = steps.run(
        "durable check-deploy", [durable, "check-deploy", "--app", "shop.workflows:app"], project
    )
    assert "replays cleanly" in out, out
    source = (project / "shop" / "workflows.py").read_text()
    changed = source.replace("def compose(", "def compose_message(").replace(
        "message = compose(", "message = compose_message("
    )
    (project / "shop" / "workflows_next.py").write_text(changed)
    check = [durable, "check-deploy", "--app", "shop.workflows_next:app"]
    done = subprocess.run(
        check, cwd=project, env=steps.env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert waiting in done.stdout and "nondeterministic at 0001" in done.stdout, done.stdout


def _console_is_served(banner: str) -> None:
    """The web console's files come from the installed wheel, not from this checkout."""
    found = re.search(r"console +(http://127\.0\.0\.1:\d+/console/)", banner)
    assert found, banner
    for name, kind in (("", "text/html"), ("console.js", "text/javascript")):
        with urllib.request.urlopen(found.group(1) + name, timeout=10) as response:
            assert response.headers["Content-Type"].startswith(kind)
            assert len(response.read()) > 1000


def _child_runs(steps: Steps, project: Path, durable: str, output: Output) -> None:
    """The template's distributed map: each name a child run, listed with its parent."""
    team = [durable, "start", "greet-team", "--input", '["Ada", "Bob"]', "-q"]
    team_id = steps.run("durable start greet-team", team, project).strip()
    output.wait_for(f"{team_id}  ✓ succeeded")
    shown = json.loads(steps.run("durable show", [durable, "show", team_id, "--json"], project))
    assert shown["output"] == ["sent: Hello, Ada!", "sent: Hello, Bob!"], shown
    kids = [s["child"] for s in shown["steps"] if s.get("child")]
    assert len(kids) == 2, shown["steps"]
    listed = steps.run("durable runs", [durable, "runs", "--workflow", "greet-one"], project)
    assert all(k in listed for k in kids) and team_id in listed, listed


def _dev_and_a_run(steps: Steps, project: Path, venv: Path, durable: str) -> None:
    """``make dev``; a run started and approved through the CLI finishes; Ctrl-C ends all."""
    began = time.perf_counter()
    dev = _start_dev(project, venv, steps.env)
    output = Output(dev)
    try:
        output.wait_for("Ctrl-C stops everything")
        banner = output.text
        assert "durable dev ready" in banner and "durable-ledger-dev" in banner
        # The app, and the project's own variable (stack.yaml) for the workers.
        assert "shop.workflows:app" in banner and "stack.yaml   worker: WELCOME_FROM" in banner
        assert "x600: an hour passes in 6.0 s" in banner, banner
        start = [durable, "start", "greet", "--input", '{"name": "Ada"}', "-q"]
        run_id = steps.run("durable start", start, project).strip()
        output.wait_for("waiting for callback approval")
        _attention(steps, project, durable, output, run_id)
        steps.run("durable approve", [durable, "approve", run_id, "approval"], project)
        output.wait_for(f"{run_id}  ✓ succeeded")
        shown = json.loads(steps.run("durable show", [durable, "show", run_id, "--json"], project))
        assert shown["status"] == "SUCCEEDED"
        assert shown["output"] == "sent: Hello, Ada!"
        # An input over 512 bytes: the project's stack keeps it in an item of its own from
        # its first deploy (template.yaml's InputsApart), and every read puts it back.
        names = ["Ada", "Bob", "C" * 600]
        fan_out = [durable, "start", "greet-all", "--input", json.dumps(names), "-q"]
        batch_id = steps.run("durable start greet-all", fan_out, project).strip()
        output.wait_for(f"{batch_id}  ✓ succeeded")
        shown = json.loads(
            steps.run("durable show", [durable, "show", batch_id, "--json"], project)
        )
        assert shown["input"] == names, shown
        assert shown["output"] == [f"sent: Hello, {n}!" for n in names], shown
        assert any(s["kind"] == "batch" for s in shown["steps"]), shown["steps"]
        _child_runs(steps, project, durable, output)
        _console_is_served(banner)
        cost = steps.run("durable cost", [durable, "cost", "--workflow", "greet"], project)
        assert "greet" in cost and "SUCCEEDED" in cost and "list prices" in cost, cost
        listed = steps.run("durable schedules", [durable, "schedules"], project)
        # The team's nightly import, declared in code, created by durable dev's Scheduler.
        assert "nightly-import" in listed and "enabled" in listed, listed
        _check_deploy(steps, project, durable, output)
    finally:
        _stop_dev(dev, output)
    steps.times.append(("make dev, a run, Ctrl-C", time.perf_counter() - began))
    _console_said(output.text, run_id)
    for _ in range(100):  # every process the stack started has ended
        if _group_gone(dev.pid):
            break
        time.sleep(0.1)
    assert _group_gone(dev.pid), "processes of `make dev` outlived its Ctrl-C"


def _stop_dev(dev: subprocess.Popen[str], output: Output) -> None:
    """A terminal's Ctrl-C to ``make dev``: it reaches the whole process group."""
    os.killpg(dev.pid, signal.SIGINT)
    try:
        # Generous for a loaded CI machine; durable dev prints every thread's stack if
        # its own stop takes more than 30 s, and that ends up in the failure below.
        dev.wait(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(dev.pid, signal.SIGKILL)
        output.join(10)
        raise AssertionError(f"`make dev` did not stop on Ctrl-C:\n{output.text}") from None
    output.join(10)


def _the_tutorial(steps: Steps, project: Path, venv: Path, durable: str) -> None:
    """docs/tutorial-nightly-import.md's app copied into the project and its "Try it under
    durable dev" section walked on the project's stack (``tests.project.tutorial``)."""
    shutil.copy(ROOT / "examples" / "nightly_prices.py", project / "shop" / "nightly_prices.py")
    began = time.perf_counter()
    dev = _start_dev(project, venv, steps.env, app=tutorial.APP)
    output = Output(dev)
    try:
        output.wait_for("Ctrl-C stops everything")
        assert f"app          {tutorial.APP}" in output.text, output.text
        tutorial.walk(
            lambda label, *args: steps.run(label, [durable, *args], project),
            lambda marker: output.wait_for(marker, timeout=120),
            project,
        )
    finally:
        _stop_dev(dev, output)
    steps.times.append(("the tutorial under make dev", time.perf_counter() - began))
    assert "Traceback" not in output.text and "outside a step" not in output.text, output.text


def _attention(steps: Steps, project: Path, durable: str, output: Output, waiting: str) -> None:
    """With an approval waiting and a run failed, `durable runs --attention` lists both,
    saying what the waiting one waits for (issue 33, item 2)."""
    start = [durable, "start", "broken-sync", "-q"]
    broken = steps.run("durable start broken-sync", start, project).strip()
    output.wait_for(f"{broken}  ✗ failed")
    listed = steps.run("durable runs --attention", [durable, "runs", "--attention"], project)
    rows = {line.split()[0]: line for line in listed.splitlines()[2:] if line.strip()}
    assert set(rows) == {waiting, broken}, listed
    assert "FAILED" in rows[broken] and "callback approval until" in rows[waiting], listed


def _console_said(console: str, run_id: str) -> None:
    """What `make dev` printed: event lines, the code's own log line, no JSON."""
    assert "• stopped" in console, console
    assert "Traceback" not in console, console
    assert f"{run_id}  ▶ started" in console and "✓ step" in console
    assert '"_aws"' not in console  # no metric JSON on the console
    # ctx.logger's line, in the console's format (not CloudWatch's JSON), once.
    assert console.count(f"{run_id}  » waiting for approval to greet Ada") == 1, console
    assert "real, " in console and " virtual)" in console, console


def _own_stack_is_built(project: Path) -> None:
    """stack.yaml's policy and variable are in what sam build made, on the worker alone;
    template.yaml is as durable init wrote it."""
    from durable.local.overlay import load_cfn

    built = load_cfn((project / ".aws-sam/build/template.yaml").read_text(), "built")
    worker = built["Resources"]["WorkerFunction"]["Properties"]
    assert worker["Environment"]["Variables"]["WELCOME_FROM"] == "hello@example.com"
    assert "ses:SendEmail" in json.dumps(worker["Policies"])
    api = built["Resources"]["ApiFunction"]["Properties"]
    assert "WELCOME_FROM" not in api["Environment"]["Variables"]
    assert "ses:SendEmail" not in json.dumps(api["Policies"])
    assert "SendWelcomeEmail" not in (project / "template.yaml").read_text()


def _deployed(steps: Steps, project: Path, venv: Path, stacks: StackFactory) -> None:
    """The project's stack as sam build makes it (for this machine's CPU), each handler run
    from its built folder in a bare python3.12: the API starts a run, the worker steps it,
    an approval through the API, a lost timer found by the sweeper, children, a start by an
    EventBridge event, the deploy gate, the purge after retention (issue 30)."""
    # The project's own recipe (issue 46, item 5): make smoke builds for this machine into
    # .aws-sam/smoke and sends each built function an event in a bare python3.12, then
    # starts a run through the built API; that build then serves the journeys below.
    out = steps.run(
        "make smoke",
        ["make", "smoke", f"VENV={venv}", "WORKFLOW=greet", 'INPUT={"name": "Ada"}'],
        project,
    )
    assert "• 7 of 7 checks passed" in out, out[-3000:]
    assert "✓ a run of greet:" in out
    began = time.perf_counter()
    build = project / ".aws-sam" / "smoke"
    locked = pins(LOCK.read_text())
    built = installed(build / "WorkerFunction")
    assert built.pop("durable-lambda") == "0.1.0"  # the library, from the wheel
    assert built == locked  # the scaffold's pins: what this repo's lock tested
    assert not (build / "WorkerFunction" / "yaml").exists()
    assert list((build / "WorkerFunction" / "shop").glob("__pycache__/*.cpython-312.pyc"))
    stack = stacks(build)
    run_id = journeys.start(stack, "greet", {"name": "Ada"})
    stack.drain()
    (approval,) = journeys.waiting_on(stack, run_id)
    assert approval["kind"] == "callback", approval
    journeys.answer(stack, run_id, "approval", "ok")
    stack.drain()
    (nap,) = journeys.waiting_on(stack, run_id)
    assert nap["kind"] == "sleep", nap
    journeys.wake_by_sweeper(stack, 3600 + 180)
    greeted = journeys.shown(stack, run_id)
    assert greeted["status"] == "SUCCEEDED" and greeted["output"] == "sent: Hello, Ada!", greeted
    team = journeys.start(stack, "greet-team", ["Ada", "Bob"])
    stack.drain()
    shown = journeys.shown(stack, team)
    assert shown["output"] == ["sent: Hello, Ada!", "sent: Hello, Bob!"], shown
    evented = journeys.start_by_event(stack, "greet-one", "Cy", "com.example.orders")
    stack.drain()
    assert journeys.shown(stack, evented)["output"] == "sent: Hello, Cy!"
    assert journeys.deploy_gate(stack)["status"] == "Succeeded"
    journeys.purge(stack, run_id, retention_days=30)
    steps.times.append(("built functions, a run's life", time.perf_counter() - began))


def test_from_pip_install_to_a_run_of_your_own_workflow_and_a_sam_build(
    workspace: Path, deployed_stacks: StackFactory
) -> None:
    env = _clean_env(workspace)
    steps = Steps(env)
    python = sys.executable
    try:
        # 1. The wheel, built from this checkout the way a release would be.
        dist = workspace / "dist"
        steps.run(
            "build the wheel",
            [python, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
            workspace,
        )
        (wheel,) = dist.glob("durable_lambda-*.whl")
        requirement = f"durable-lambda @ {wheel.as_uri()}"

        # 2. A fresh virtualenv with the library (and its local extra) from the wheel.
        venv = workspace / "venv"
        steps.run("fresh venv", [python, "-m", "venv", str(venv)], workspace)
        steps.run(
            "pip install the wheel",
            [
                str(venv / "bin" / "pip"),
                "install",
                "-q",
                "--disable-pip-version-check",
                f"durable-lambda[local] @ {wheel.as_uri()}",
            ],
            workspace,
        )
        durable = str(venv / "bin" / "durable")

        # 3. durable init: a project of one's own.
        # No --requirement: the project pins this version and holds the wheel this library
        # came from in wheels/, by relative paths only (issue 46, item 6).
        out = steps.run("durable init", [durable, "init", "shop"], workspace)
        project = workspace / "shop"
        assert "make dev" in out and (project / "shop" / "workflows.py").exists()
        assert requirement not in (project / "pyproject.toml").read_text()
        assert '"durable-lambda==0.1.0"' in (project / "pyproject.toml").read_text()
        lambda_requirements = (project / "deploy/lambda/requirements.txt").read_text()
        assert "durable-lambda==0.1.0\n--find-links ./wheels" in lambda_requirements
        assert (project / "wheels" / wheel.name).is_file()
        assert "stack.yaml" in out and (project / "stack.yaml").is_file()
        (project / "stack.yaml").write_text(OWN_STACK)
        workflows = project / "shop" / "workflows.py"
        workflows.write_text(workflows.read_text() + OWN_APP)
        (project / "tests" / "test_own.py").write_text(OWN_TESTS)

        # 4. Its tests: `make test` installs the project into the venv, then pytest: the
        # scaffold's three and the team's own (the second night attaches to the running
        # onboarding; one advance runs three attempts an hour apart).
        out = steps.run("make test", ["make", "test", f"VENV={venv}"], project)
        assert "7 passed" in out, out

        # 5. The whole stack, a run started and approved through the CLI, Ctrl-C.
        _dev_and_a_run(steps, project, venv, durable)

        # 5b. The tutorial's nightly import, walked as its page says, on the same stack.
        _the_tutorial(steps, project, venv, durable)

        # 6. The stack: validated and built by SAM, installed by the project's own tooling.
        out = steps.run("make validate", ["make", "validate", f"VENV={venv}"], project)
        assert "durable/template.yaml is a valid SAM Template" in out
        out = steps.run("make build", ["make", "build", f"VENV={venv}"], project)
        assert "template.yaml + stack.yaml -> .aws-sam/durable/template.yaml" in out
        _own_stack_is_built(project)
        built = project / ".aws-sam" / "build" / "WorkerFunction"
        assert (built / "shop" / "workflows.py").exists()
        assert (built / "durable" / "engine" / "engine.py").exists()  # the library, from the wheel
        assert not (built / "examples").exists() and not (built / "tests").exists()
        assert "aarch64" in " ".join(p.name for p in built.glob("pydantic_core/*.so"))

        # 7. What make build made, run: the same build for this machine's CPU.
        _deployed(steps, project, venv, deployed_stacks)
    finally:
        steps.report()
