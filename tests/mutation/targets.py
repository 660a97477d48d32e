"""What is mutated: the engine core, and the ledgers' write paths."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Target:
    """A module to mutate; ``scope`` limits it to those functions/classes (qualified names,
    nested code included); empty means the whole module."""

    path: str
    scope: tuple[str, ...] = ()

    @property
    def module(self) -> str:
        """The dotted import name: ``durable/adapters/memory.py`` -> ``durable.adapters.memory``."""
        return self.path.removesuffix(".py").replace("/", ".")

    @property
    def stem(self) -> str:
        return self.path.rsplit("/", 1)[-1].removesuffix(".py")

    def covers(self, qualname: str) -> bool:
        return not self.scope or any(
            qualname == name or qualname.startswith(name + ".") for name in self.scope
        )


_MEMORY_WRITES = tuple(
    f"MemoryLedger.{name}"
    for name in (
        "create_run",
        "purge_leftovers",
        "expire",
        "claim",
        "update_run",
        "continue_run",
        "operate",
        "_guarded",
        "write_step",
        "write_step_fenced",
        "_bump_inbox",
        "complete_waiting",
        "add_signal",
        "consume_signal",
        "due_runs",
        "claim_trigger",
        "start_child",
        "start_children",
        "finish_child",
        "get_steps",
    )
)

_DYNAMODB_WRITES = tuple(
    f"DynamoLedger.{name}"
    for name in (
        "create_run",
        "purge_leftovers",
        "claim",
        "_claim_sets",
        "operate",
        "_operate_reopening",
        "update_run",
        "_check_projected_size",
        "continue_run",
        "_update",
    )
)

# The writes every DynamoDB mixin shares: transactions, the run item's conditional update
# and guard check, and the update expression a change becomes.
_DYNAMODB_TABLE_WRITES = tuple(
    f"TableBase.{name}"
    for name in ("_transact", "_run_update", "_run_check", "_change_expression", "run_assignments")
)

TARGETS: tuple[Target, ...] = (
    Target("durable/core/leases.py"),
    Target("durable/engine/lease_keeping.py"),
    Target("durable/core/tokens.py"),
    Target("durable/core/secrets.py"),
    Target("durable/core/retry.py"),
    Target("durable/engine/steps.py"),
    Target("durable/engine/waits.py"),
    Target("durable/engine/effects.py"),
    Target("durable/engine/execution.py"),
    Target("durable/engine/endings.py"),
    Target("durable/engine/interrupts.py"),
    Target("durable/hooks.py"),
    # The pre-deploy check: the dry replay (shared with retry --upgrade-to), the read-only
    # ledger wrapper and the verdicts.
    Target("durable/engine/deploy_check.py"),
    # The memory ledger: its writes (and the due index's paging). The test helpers and the
    # other memory ports are out. The copies that keep its callers (and a warm worker's
    # view, durable.core.history_cache) from sharing records are in model.py.
    Target("durable/adapters/memory.py", _MEMORY_WRITES),
    Target("durable/core/model.py", ("copy_run", "copy_step")),
    # Sleeps kept in the run item: what a suspension writes, what every reader presents.
    Target("durable/core/sleeps.py"),
    # A warm worker's view of its runs: the rule, and every write it must follow.
    Target("durable/core/history_cache.py"),
    # Large values: what goes to the payload store, and what a read resolves.
    Target("durable/core/claim_check.py"),
    # The DynamoDB ledger's writes, through the contract suite on moto in-process: the run
    # writes (dynamodb.py), the step writes (the StepsMixin), the shared transaction and
    # expression helpers (TableBase) and the conditions (dynamodb_support.py). Reads
    # (get_run, load, list_runs) and the events mixin (dynamodb_events.py) are out.
    Target("durable/adapters/dynamodb.py", _DYNAMODB_WRITES),
    Target("durable/adapters/dynamodb_steps.py", ("StepsMixin",)),
    Target("durable/adapters/dynamodb_table.py", _DYNAMODB_TABLE_WRITES),
    Target("durable/adapters/dynamodb_support.py", ("guard_condition", "step_condition")),
    # Schedules: the expressions' evaluation, fires and reconcile.
    Target("durable/core/recurrence.py"),
    Target("durable/engine/schedules.py"),
    # A run's bill: what each invocation records, and DynamoDB's rule for a write's units.
    Target("durable/core/usage.py"),
    Target(
        "durable/adapters/dynamodb_units.py",
        ("item_size", "_value_size", "_units", "Index", "write_units"),
    ),
    # Flow control: the gates' rules, admission before a replay, leaving at the end.
    Target("durable/core/flow.py"),
    Target("durable/engine/admission.py"),
    Target("durable/adapters/dynamodb_gates.py", ("GatesMixin",)),
    # Inline fan-out: the completion rules, the batch driver, the branches' cursors and
    # the turns their threads take.
    Target("durable/core/completion.py"),
    Target("durable/engine/fanout.py"),
    Target("durable/engine/cursor.py"),
    Target("durable/engine/turns.py"),
    # Child runs and distributed maps: the engine side, and the DynamoDB transactions
    # that start children and carry their reports (the memory side is in _MEMORY_WRITES).
    Target("durable/engine/children.py"),
    Target("durable/engine/distributed.py"),
    Target("durable/adapters/dynamodb_children.py", ("ChildrenMixin",)),
    # Issue 43: a run's chain (what every handle follows), the backoff every duration
    # computed from user settings goes through, and the keys' namespaces.
    Target("durable/engine/lineage.py"),
    Target("durable/core/backoff.py"),
    Target(
        "durable/core/ids.py",
        ("reserved_prefix", "check_user_key", "check_key_scope", "keyed_run", "run_id_for_key"),
    ),
)


def find(path: str) -> Target:
    """The target for ``path`` (``durable/core/retry.py`` or ``retry``); ``KeyError`` if none."""
    for target in TARGETS:
        if path in (target.path, target.stem, target.module):
            return target
    known = ", ".join(t.path for t in TARGETS)
    raise KeyError(f"{path} is not a mutation target (known: {known})")
