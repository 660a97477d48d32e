"""Deployment settings: one validated, frozen model; each field is one environment variable.

The composition root (``durable/handlers/bootstrap.py``) is the only code that reads the process
environment: it passes ``os.environ`` to ``Settings.from_env``. Everything downstream gets a
``Settings`` value, so tests build one directly and nothing is configured at import time.
``template.yaml`` sets exactly these variables (a test holds the two lists equal).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from durable.core.config import EngineConfig
from durable.core.ids import DUE_SHARDS
from durable.core.ports import check_crash_target
from durable.errors import InvalidInput

if TYPE_CHECKING:
    from durable.core.usage import Prices

PREFIX = "DURABLE_"
# Set by ``durable dev`` (and tests through it) only; a deployed template never sets them.
LOCAL_ONLY = frozenset(
    {
        "time_scale",
        "clock_file",
        "shared_clock",
        "deadline_overrun_seconds",
        "crash_at",
        "local_key_file",
        "console_events",
        "determinism_warnings",
        "payload_folder",
    }
)
_APP_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_CRASH_AT = re.compile(
    r"^(ledger|effects|timers|invoker|payloads)\.[a-z_]+:[1-9][0-9]*:(before|after)(:.+)?$"
)

Seconds = Annotated[int, Field(ge=0, le=86_400)]


class Settings(BaseModel):
    """What a deployment configures. Field ``x`` is read from ``DURABLE_X``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Where the workflows are: ``module:attribute`` naming a ``durable.App``.
    app: str
    ledger_table: str = Field(min_length=3, max_length=255)
    idempotency_table: str = Field(min_length=3, max_length=255)
    # The worker function's ARN: the target of self-invocations and timers. On AWS the
    # ``live`` alias's (the template's AutoPublishAlias): a deploy moves it after its gate.
    worker_function: str | None = None
    # The worker version a deploy hook checks before the alias moves to it
    # (``durable.ops.deploy_gate``): the template sets it on the hook function only.
    worker_version: str | None = None
    # The API asks the workers which workflow versions they serve and refuses (503) to
    # start one they do not, trusting an answer this long (``durable.api.served``). 0: off.
    served_check_seconds: Seconds = 30
    scheduler_group: str | None = None
    # The role EventBridge Scheduler assumes to invoke the worker.
    scheduler_role_arn: str | None = None
    # Secrets Manager secret ids: the HMAC key of callback tokens, the webhook key(s).
    callback_secret_name: str | None = None
    webhook_secret_name: str | None = None
    # Public base of callback URLs (the API's stage URL).
    callback_base_url: str = ""
    # A webhook's signed timestamp may be this old (or this far ahead) at most.
    webhook_tolerance_seconds: Seconds = 300
    # Every hook may be signed with one key (a plain secret, or a "*" entry). Off by
    # default: a deployed stack keeps a key per hook ({"hook-name": "key"}), so a key
    # handed to one sender cannot start another hook's workflow. ``durable dev`` turns it on.
    webhook_shared_secret: bool = False
    # EventBridge events may start runs only from these sources and accounts (comma
    # separated). The rule's pattern says the same; the handler checks again. Empty: no
    # EventBridge event starts a run.
    start_event_sources: str = ""
    start_event_accounts: str = ""
    # The KMS key that wraps each run's data key (secret-typed values are sealed with it).
    # Empty: workflows whose inputs or results hold secrets are refused.
    kms_key_id: str = ""
    # Request bodies above this are refused with 413 before parsing. A body over the
    # payload offload size goes to the payload bucket; without one it must fit in the run
    # item (DynamoDB's 400 KB). Lambda takes requests of at most 6 MB, envelope included.
    max_body_bytes: int = Field(default=256 * 1024, ge=1024, le=5 * 1024 * 1024)
    # The S3 bucket that keeps values too large for a ledger item (the template's
    # PayloadBucket; ``durable.core.claim_check``). Empty: such values fail as PayloadTooLarge.
    payload_bucket: str = ""
    # Texts longer than this go to the bucket; none may be longer than the maximum.
    payload_offload_bytes: int = Field(default=64 * 1024, ge=1024, le=128 * 1024)
    payload_max_bytes: int = Field(default=4 * 1024 * 1024, ge=128 * 1024, le=1024 * 1024 * 1024)
    retention_days: int = Field(default=30, ge=1, le=3650)
    # A run's usage is priced at this region's list prices (``durable.core.usage.PRICES``; the
    # template passes the stack's region; one not in the table is priced as us-east-1),
    # with any price overridden by ``prices``: a JSON object of USD per unit, e.g.
    # {"wcu": 7.05e-7} (negotiated rates, another region).
    price_region: str = ""
    prices: str = ""
    due_shards: int = Field(default=DUE_SHARDS, ge=1, le=64)
    # Write an input over 512 bytes in an item of its own (docs/architecture.md, "Data
    # model"): every transition of the run item then costs a unit, not one per KB of input.
    # Off until every function of the stack runs a version that reads that layout (a
    # worker from before it would run such a run with an empty input): turn it on in the
    # deploy after the one that brings it (docs/operations.md).
    inputs_apart: bool = False
    # Keep a top-level sleep that suspends the run in the run item: written with the
    # suspension, ended by the claim that wakes it (``durable.core.sleeps``), instead of
    # two step-item transactions: 4 write units less per such sleep. Off until every
    # function of the stack reads that layout (a worker from before it would not see the
    # sleep and sleep it again): turn it on in the deploy after the one that brings it
    # (docs/operations.md).
    sleeps_on_run: bool = False
    steps_per_invocation: int = Field(default=1000, ge=1)
    # Waits (sleeps, retry backoffs, condition polls) this short are served inside the
    # invocation when it has the time; longer ones suspend the run and arm a timer.
    inprocess_wait_seconds: Seconds = 5
    sweep_grace_seconds: Seconds = 120
    # A run the sweeper invoked is due again this long after, should that invocation be
    # lost before it claims the run (``EngineConfig.sweep_retrigger``). Deployed, Lambda
    # retries a failed asynchronous invocation twice (after about 1 and 2 minutes) before
    # this comes into play; ``durable dev`` sets its worker timeout here, so a lost
    # invocation is swept again within a lease.
    sweep_retrigger_seconds: Seconds = 300
    sweep_max_invocations: int = Field(default=500, ge=1, le=10_000)
    # Every AWS client's budget (``durable.adapters.aws_services.client_options``): how long
    # to wait for a connection and for each answer, and how many attempts a request gets
    # (botocore's "standard" retry mode). A store that stops answering then fails a request
    # within about attempts x read timeout (9 s by default; the API answers 503 with
    # Retry-After), instead of botocore's defaults (a 60 s read, up to 10 attempts).
    aws_connect_timeout_seconds: float = Field(default=2.0, gt=0, le=60)
    aws_read_timeout_seconds: float = Field(default=3.0, gt=0, le=900)
    aws_max_attempts: int = Field(default=3, ge=1, le=10)
    # Self-invocations in one unbroken chain before the worker lets the sweeper take over
    # (a pause of about a sweep period); bounds a run that never waits.
    max_hops: int = Field(default=1000, ge=1)
    # X-Ray tracing through Powertools; importing the X-Ray SDK costs ~200 ms of cold
    # start, so it is only loaded when this is on (the template turns it on).
    tracing: bool = False
    service_name: str = "durable"
    metrics_namespace: str = "Durable"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # Local only (``durable dev --time-scale``): virtual time runs ``time_scale`` times
    # faster, from the epoch in ``clock_file``; durations measured in real terms (leases,
    # the invocation's remaining time) are scaled so they stay real seconds long.
    time_scale: float = Field(default=1.0, gt=0)
    clock_file: str | None = None
    # Local only (``durable dev``): every process of the stack runs on one host and reads
    # one clock, that host's ``time.time()`` through the epoch in ``clock_file``. A lease
    # that clock says has expired has expired for every process, so a takeover needs no
    # clock-skew allowance (``EngineConfig.clock_skew`` = 0). Refused without
    # ``clock_file``: processes on different machines read different clocks.
    shared_clock: bool = False
    # Local only (``durable dev``): how long a worker process may outlive its invocation's
    # deadline. Its worker pool ends an invocation at the deadline (a kernel timer in the
    # worker, a SIGKILL from the pool shortly after as a backstop); unset, the engine's
    # default for Lambda (``EngineConfig.deadline_overrun``, 2 s). Refused without
    # ``clock_file``, like ``shared_clock``.
    deadline_overrun_seconds: float | None = Field(default=None, ge=0, le=60)
    # Local only (crash tests through ``durable dev``): the worker SIGKILLs itself at one
    # port call, ``port.method:k:before|after[:once-file]``; see ``durable.aws.crash_injected``.
    # ``port.method`` is one of ``durable.core.ports.CRASH_TARGETS``; another name is refused.
    crash_at: str | None = None
    # ``durable dev`` only: a file holding the master key that wraps data keys in place of
    # KMS (kept in its state folder, so sealed values survive a restart).
    local_key_file: str | None = None
    # ``durable dev`` only: print one readable line per run event (``durable.local.console``)
    # in place of the JSON logs and metrics meant for CloudWatch.
    console_events: bool = False
    # ``durable dev`` only: large values are kept in this folder (its state folder's
    # ``payloads``) in place of S3.
    payload_folder: str | None = None
    # ``durable dev`` only: workflow code that reads the clock, randomness or the network
    # outside a step is a warning line (``durable.engine.determinism.WarningGuard``); deployed,
    # no guard runs (it costs a frame walk per guarded call).
    determinism_warnings: bool = False

    @field_validator("app")
    @classmethod
    def _app_ref(cls, value: str) -> str:
        if not _APP_REF.match(value):
            raise ValueError("must be 'package.module:attribute', e.g. 'myapp.workflows:app'")
        return value

    @field_validator("crash_at")
    @classmethod
    def _crash_point(cls, value: str | None) -> str | None:
        if value is not None and not _CRASH_AT.match(value):
            raise ValueError(
                "must be 'port.method:k:before|after[:once-file]', e.g. 'ledger.claim:1:after'"
            )
        if value is not None:
            check_crash_target(value.split(":", 1)[0])  # one of durable.core.ports.CRASH_TARGETS
        return value

    @field_validator("shared_clock", "deadline_overrun_seconds", "local_key_file")
    @classmethod
    def _dev_stack_only(cls, value: object, info: ValidationInfo) -> object:
        # Both are true of durable dev's processes only; it always sets clock_file too.
        if value is not None and value is not False and not info.data.get("clock_file"):
            raise ValueError(
                "is local only (durable dev sets it with DURABLE_CLOCK_FILE); a deployment "
                "must leave it unset"
            )
        return value

    @classmethod
    def env_name(cls, field: str) -> str:
        return PREFIX + field.upper()

    @classmethod
    def env_names(cls) -> list[str]:
        return [cls.env_name(name) for name in cls.model_fields]

    @field_validator("prices")
    @classmethod
    def _prices_are_known(cls, value: str) -> str:
        if value:
            from durable.core.usage import Prices

            try:
                overrides = json.loads(value)
            except ValueError as e:
                raise ValueError(f'not JSON ({e}); e.g. {{"wcu": 7.05e-7}}') from e
            if not isinstance(overrides, dict) or not all(
                isinstance(v, int | float) and not isinstance(v, bool) and v >= 0
                for v in overrides.values()
            ):
                raise ValueError("a JSON object of USD per unit (numbers >= 0)")
            Prices.of(None, overrides)  # unknown keys are refused by name
        return value

    def price_table(self) -> Prices:
        from durable.core.usage import Prices

        return Prices.of(self.price_region or None, json.loads(self.prices or "{}"))

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Build from a mapping of environment variables (only ``DURABLE_*`` are read).

        Empty strings count as unset, so a template may pass an optional value through
        a parameter that defaults to "". Errors name the variable, not the field.
        """
        # Other DURABLE_* variables (local tooling, tests) are not settings: ignored here;
        # the template test keeps the deployed set equal to the fields.
        names = {cls.env_name(f): f for f in cls.model_fields}
        values = {f: environ[k] for k, f in names.items() if environ.get(k, "") != ""}
        try:
            return cls.model_validate(values)
        except ValidationError as e:
            first = e.errors()[0]
            field = str(first["loc"][0]) if first["loc"] else "app"
            raise InvalidInput(
                f"setting {cls.env_name(field)}: {first['msg']}", field=cls.env_name(field)
            ) from e

    def allowed(self, field: str) -> frozenset[str]:
        """A comma-separated setting as a set of its non-empty entries."""
        value: str = getattr(self, field)
        return frozenset(part.strip() for part in value.split(",") if part.strip())

    def require(self, field: str, needed_by: str) -> str:
        """A field that ``needed_by`` cannot work without; a clear error when it is unset."""
        value = getattr(self, field)
        if not value:
            raise InvalidInput(
                f"{needed_by} needs the setting {self.env_name(field)}", field=self.env_name(field)
            )
        return str(value)

    def engine_config(self, callback_secret: bytes | None = None) -> EngineConfig:
        real = EngineConfig()  # the defaults of the durations that are real seconds
        scale = self.time_scale
        # One clock for every process (durable dev only): nothing to allow for. Safe because
        # the lease is taken over only once that one clock is past it, and the lease already
        # outlasts the old owner: it ends ``deadline_overrun`` after the invocation's deadline,
        # by which time the old worker process has been killed, so it starts nothing more. A
        # request it sent before dying that lands after the takeover is what it is on AWS:
        # a run-item write fails its fence, a step record is first-writer-wins.
        skew = timedelta(0) if self.shared_clock else real.clock_skew
        overrun = (
            real.deadline_overrun
            if self.deadline_overrun_seconds is None
            else timedelta(seconds=self.deadline_overrun_seconds)
        )
        return EngineConfig(
            lease=real.lease * scale,
            clock_skew=skew * scale,
            default_step_budget=real.default_step_budget * scale,
            safety_margin=real.safety_margin * scale,
            deadline_overrun=overrun * scale,
            inprocess_wait_threshold=timedelta(seconds=self.inprocess_wait_seconds) * scale,
            handoff_grace=real.handoff_grace * scale,
            cancel_check_interval=real.cancel_check_interval * scale,
            sweep_retrigger=timedelta(seconds=self.sweep_retrigger_seconds) * scale,
            sweep_grace=timedelta(seconds=self.sweep_grace_seconds) * scale,
            steps_per_invocation=self.steps_per_invocation,
            due_shards=self.due_shards,
            retention=timedelta(days=self.retention_days),
            callback_secret=callback_secret,
            callback_base_url=self.callback_base_url,
            sweep_max_invocations=self.sweep_max_invocations,
            payload_offload_bytes=self.payload_offload_bytes,
            payload_max_bytes=self.payload_max_bytes,
            sleeps_on_run=self.sleeps_on_run,
        )

    @property
    def retention_seconds(self) -> int:
        return self.retention_days * 86_400
