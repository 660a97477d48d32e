"""How soon a lost trigger is recovered (issue 45, item 1), and ``durable dev``'s
``--scheduler-port`` (item 4).

Every path recovers within a lease plus one sweeper tick: a claimed run when its lease
ends (tests/unit/test_local_stack.py), a run due and unleased (a start whose invocation
was lost) at the next tick, and a run the sweeper invoked whose invocation was lost too
when its retrigger comes, which ``durable dev`` sets to a worker timeout (it was the
deployed 5 minutes; Lambda's retries cover those minutes on AWS). The worker pool's own
retries are in tests/unit/test_local_pool_retries.py.
"""

from __future__ import annotations

import re
import signal
import socket
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from durable import App, Context, RunStatus
from durable.adapters.schema import load_template
from durable.core.recurrence import parse
from durable.local.server import DevOptions, DevServer
from durable.settings import Settings
from durable.testing import LocalRunner

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def rate_seconds(expression: str) -> float:
    match = re.fullmatch(r"rate\((\d+) (minute|minutes|hour|hours|day|days)\)", expression)
    assert match, f"not a rate(...) expression: {expression}"
    unit = {"minute": 60, "hour": 3600, "day": 86400}[match[2].rstrip("s")]
    return int(match[1]) * unit


def sweeper_schedules() -> dict[str, str]:
    """The sweeper's ScheduleExpression in the repository's template and in the one
    ``durable init`` writes (read as text: its placeholders are not YAML)."""
    found = {}
    events = load_template(ROOT / "template.yaml")["Resources"]["SweeperFunction"]
    found["template.yaml"] = events["Properties"]["Events"]["Sweep"]["Properties"][
        "ScheduleExpression"
    ]
    text = (ROOT / "durable/scaffold/project/template.yaml.tmpl").read_text()
    sweeper = text.split("  SweeperFunction:", 1)[1].split("\n  EventsFunction:", 1)[0]
    (expression,) = re.findall(r"ScheduleExpression: (\S+ \S+)", sweeper)
    found["scaffold"] = expression
    return found


def test_the_sweeper_ticks_every_minute_deployed_and_every_second_in_dev() -> None:
    # rate(1 minute) is the shortest EventBridge Scheduler accepts; docs/operations.md
    # gives what a tick costs.
    for where, expression in sweeper_schedules().items():
        parse(expression)  # a valid Scheduler expression
        assert rate_seconds(expression) <= 60, where
    assert DevOptions(app="x:app").sweep_interval <= 1.0


def dev_settings(tmp_path: Path, worker_timeout: float = 60.0) -> Settings:
    """The settings ``durable dev`` gives its handlers."""
    tmp_path.mkdir(exist_ok=True)
    server = DevServer(
        DevOptions(app="shop.workflows:app", state_dir=tmp_path, worker_timeout=worker_timeout)
    )
    return Settings.from_env(server._handler_env())


def one_step_app() -> App:
    app = App()

    @app.step
    def work() -> str:
        return "done"

    @app.workflow
    def flow(ctx: Context) -> str:
        return work()

    return app


@pytest.mark.parametrize("worker_timeout", [60.0, 4.0])
def test_on_the_dev_stack_a_lost_start_is_taken_at_the_next_tick_and_a_lost_sweep_within_a_lease(
    tmp_path: Path, worker_timeout: float
) -> None:
    settings = dev_settings(tmp_path, worker_timeout)
    config = settings.engine_config()
    assert config.sweep_grace == timedelta(0)  # a run due now is swept now
    runner = LocalRunner(one_step_app(), config=config, remaining_seconds=lambda: worker_timeout)
    # GIVEN a start whose invocation is lost (its worker killed before the claim)
    run = runner.start("flow")
    assert runner.invoker.pop() is not None
    # WHEN the next sweep comes: the run is due since its creation and unleased
    report = runner.engine.sweep()
    # THEN that tick takes it
    assert report.invoked == 1
    # AND GIVEN that invocation is lost too (the store did not answer its claim)
    assert runner.invoker.pop() is not None
    runner.advance(timedelta(seconds=worker_timeout - 1))
    assert runner.get_run(run.run_id).status == RunStatus.PENDING
    # THEN the sweeper takes it up again a worker timeout later (was: 5 minutes)
    runner.advance(timedelta(seconds=2))
    assert runner.get_run(run.run_id).status == RunStatus.SUCCEEDED


def test_deployed_the_retrigger_stays_five_minutes_behind_lambdas_own_retries() -> None:
    aws = Settings(app="m:app", ledger_table="led", idempotency_table="idm")
    assert aws.engine_config().sweep_retrigger == timedelta(minutes=5)
    changed = Settings.from_env(
        {
            "DURABLE_APP": "m:app",
            "DURABLE_LEDGER_TABLE": "led",
            "DURABLE_IDEMPOTENCY_TABLE": "idm",
            "DURABLE_SWEEP_RETRIGGER_SECONDS": "90",
        }
    )
    assert changed.engine_config().sweep_retrigger == timedelta(seconds=90)


# --- durable dev --scheduler-port ---------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_the_embedded_scheduler_listens_on_the_port_asked_and_a_taken_one_is_said(
    tmp_path: Path,
) -> None:
    said: list[str] = []
    wanted = free_port()
    server = DevServer(
        DevOptions(
            app="x:app",
            state_dir=tmp_path,
            storage="moto",
            scheduler_port=wanted,
            say=said.append,
        )
    )
    try:
        server._start_servers()
        assert server.stack.moto_endpoint == f"http://127.0.0.1:{wanted}"
        assert any(f"127.0.0.1:{wanted}" in line for line in server.banner())
        # A second stack asking for the same port fails its start, naming the option.
        clash = DevServer(
            DevOptions(app="x:app", state_dir=tmp_path, storage="moto", scheduler_port=wanted)
        )
        with pytest.raises(RuntimeError, match=f"--scheduler-port {wanted} is in use"):
            clash._start_servers()
    finally:
        for close in server.stack.closers:
            close()


def test_durable_dev_passes_scheduler_port_to_the_stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from durable import cli
    from durable.local import server as dev_server

    seen: list[Any] = []

    class Recording:
        def __init__(self, options: DevOptions) -> None:
            seen.append(options)

        def start(self) -> None:
            raise RuntimeError("recorded, not started")

        def stop(self) -> None:
            pass

    monkeypatch.setattr(dev_server, "DevServer", Recording)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # durable dev puts the folder first
    previous = signal.getsignal(signal.SIGTERM)
    try:
        code = cli.main(
            ["dev", "--app", "tests.handlers.workflows:app", "--scheduler-port", "48123"]
        )
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert code == 1
    (options,) = seen
    assert options.scheduler_port == 48123
    default = cli.parser().parse_args(["dev"])
    assert default.scheduler_port == 0  # the kernel picks


# --- every AWS client's budget ------------------------------------------------------------


def test_every_client_the_composition_makes_has_timeouts_and_a_retry_budget() -> None:
    from durable.adapters.aws_services import aws_services, deploy_hook_clients

    settings = Settings.from_env(
        {
            "DURABLE_APP": "m:app",
            "DURABLE_LEDGER_TABLE": "led",
            "DURABLE_IDEMPOTENCY_TABLE": "idm",
            "DURABLE_WORKER_FUNCTION": "arn:aws:lambda:us-east-1:123456789012:function:w",
            "DURABLE_AWS_READ_TIMEOUT_SECONDS": "4.5",  # a setting changes them
        }
    )
    services = aws_services(settings)
    made: dict[str, Any] = {
        "dynamodb (effects)": cast(Any, services.effects).client,
        "lambda (invoker)": cast(Any, services.invoker).client,
        "idempotency (Powertools)": cast(Any, services.idempotency)().client,
        "codedeploy (deploy hook)": deploy_hook_clients()[1],
    }
    for name, client in made.items():
        config = client.meta.config
        read = 3.0 if "hook" in name else 4.5  # the hook has no settings: the defaults
        assert (config.connect_timeout, config.read_timeout) == (2.0, read), name
        assert config.retries == {"total_max_attempts": 3, "mode": "standard"}, name


@pytest.mark.parametrize("verbose", [False, True])
def test_the_api_and_the_sweeper_take_turns_only_under_verbose(
    tmp_path: Path, verbose: bool
) -> None:
    # Quiet (the default), metrics are off: the two handlers run side by side, as two
    # functions do on AWS. Verbose, Powertools' one metric set per process needs turns.
    server = DevServer(DevOptions(app="x:app", state_dir=tmp_path, verbose=verbose))
    assert (server.api_lock is server.sweep_lock) == verbose
    began = time.monotonic()
    server.stop()  # takes each lock once (a shared one is not waited for twice)
    assert time.monotonic() - began < 5
