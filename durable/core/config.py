"""Engine tuning knobs: one frozen value, built by the composition root from settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from durable.core.ids import DUE_SHARDS
from durable.core.retry import DEFAULT_RETRY, RetryPolicy

# The longest lifetime and retention a configuration may set (Settings' retention_days
# goes up to 3650 too).
MAX_DURATION = timedelta(days=3650)


@dataclass(frozen=True, slots=True)
class EngineConfig:
    # A lease must outlive any step body it vouches for; bodies longer than this renew
    # it before they start (see ``default_step_budget``).
    lease: timedelta = timedelta(seconds=60)
    # Two machines' clocks may disagree; an expired lease is taken over only once it is
    # this much in the past by the claimer's clock. Zero only where every process reads
    # the same clock (``durable dev``: ``Settings.shared_clock``), never on AWS.
    clock_skew: timedelta = timedelta(seconds=5)
    # The time budget of a step without ``timeout=``.
    default_step_budget: timedelta = timedelta(seconds=30)
    # Time kept back at the end of an invocation for the hand-off writes.
    safety_margin: timedelta = timedelta(seconds=2)
    # How long a worker may still be running (and writing) past its invocation's deadline:
    # a lease renewed near the deadline ends this much after it, so a takeover never comes
    # while the old owner lives. Lambda stops an invocation at its deadline; 2 s also covers
    # requests already sent. ``durable dev`` kills its workers at the deadline itself and
    # sets less (``Settings.deadline_overrun_seconds``).
    deadline_overrun: timedelta = timedelta(seconds=2)
    # Bodies executed per invocation before handing off (1 = strict isolation).
    steps_per_invocation: int = 1000
    # Waits this short are served in-process when the invocation has time left.
    inprocess_wait_threshold: timedelta = timedelta(seconds=5)
    # Delay before the sweeper treats a handed-off run as lost.
    handoff_grace: timedelta = timedelta(seconds=30)
    # A run waiting in line for a concurrency slot looks at its gate again after this,
    # woken or not (``durable.core.flow``: the backstop for a wake-up lost with its worker).
    slot_recheck: timedelta = timedelta(minutes=5)
    # A running owner looks at the run item (one fenced lease renewal, which returns it)
    # at least this often between step bodies, so a cancel request is seen within this
    # much work without a read per step.
    cancel_check_interval: timedelta = timedelta(seconds=5)
    max_takeovers: int = 3
    max_history: int = 10_000
    due_shards: int = DUE_SHARDS
    # Finished runs are purged after this long (DynamoDB TTL on ``purge_at``).
    retention: timedelta = timedelta(days=30)
    # Upper bound on a run's life, used to keep side-effect records at least as long
    # as any retry of the run could ask for them (never a fixed 24 hours).
    max_run_lifetime: timedelta = timedelta(days=365)
    default_retry: RetryPolicy = DEFAULT_RETRY
    # HMAC key of callback tokens (from Secrets Manager/SSM in production); None refuses
    # to mint tokens rather than minting forgeable ones.
    callback_secret: bytes | None = field(default=None, repr=False)
    # More keys that verify but never sign, during a rotation: the upcoming key (so every
    # container accepts it before any signs with it), then the retired one (so pending
    # callbacks keep their URLs; a replay rebuilds them with it).
    callback_verify_only_secrets: tuple[bytes, ...] = field(default=(), repr=False)
    # Public base of callback URLs, e.g. "https://api.example.com/prod".
    callback_base_url: str = ""
    # The sweeper skips due entries younger than this (2 minutes on AWS so it does not
    # race EventBridge Scheduler's own firing; 0 locally).
    sweep_grace: timedelta = timedelta(minutes=2)
    # A swept run becomes due again after this, should the invocation be lost.
    sweep_retrigger: timedelta = timedelta(minutes=5)
    sweep_max_invocations: int = 500
    # Texts longer than this (a run's input or output, a step's result or state, a
    # signal's payload) go to the payload store, when there is one (``durable.core.claim_check``);
    # none may be longer than ``payload_max_bytes``.
    payload_offload_bytes: int = 64 * 1024
    payload_max_bytes: int = 4 * 1024 * 1024
    # A sleep that suspends the run is recorded with the suspension, on the run item
    # (``durable.core.sleeps``). Every reader understands that layout; a deployed stack
    # writes it once all its functions read it (``Settings.sleeps_on_run``).
    sleeps_on_run: bool = True

    def __post_init__(self) -> None:
        if self.steps_per_invocation < 1:
            raise ValueError("steps_per_invocation must be >= 1")
        if self.max_takeovers < 1:
            raise ValueError("max_takeovers must be >= 1")
        if self.due_shards < 1:
            raise ValueError("due_shards must be >= 1")
        # Bounded so that a run's dates (its lifetime's end, a purge time, an effect
        # record's expiry: created_at + lifetime + retention) stay dates.
        if not timedelta(0) < self.max_run_lifetime <= MAX_DURATION:
            raise ValueError("max_run_lifetime must be positive and at most 3650 days")
        if self.retention > MAX_DURATION:
            raise ValueError("retention must be at most 3650 days (Settings: retention_days)")
        if self.retention < timedelta(hours=2):
            # A run id can be reused once its run expired; records are told apart by being
            # written more than durable.core.retention.LEFTOVER_MARGIN (1 h) before the new run.
            raise ValueError("retention must be at least 2 hours (Settings: retention_days >= 1)")
