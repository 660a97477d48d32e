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
        "operate",
        "write_step",
        "write_step_fenced",
        "_bump_inbox",
        "complete_waiting",
        "add_signal",
        "consume_signal",
        "due_runs",
        "claim_trigger",
    )
)

_DYNAMODB_WRITES = tuple(
    f"DynamoLedger.{name}"
    for name in (
        "create_run",
        "purge_leftovers",
        "claim",
        "_claim_sets",
        "_guard_condition",
        "_change_expression",
        "operate",
        "_operate_reopening",
        "update_run",
        "_update",
        "_step_condition",
        "write_step",
        "write_step_fenced",
    )
)

TARGETS: tuple[Target, ...] = (
    Target("durable/leases.py"),
    Target("durable/tokens.py"),
    Target("durable/retry.py"),
    Target("durable/steps.py"),
    Target("durable/waits.py"),
    Target("durable/effects.py"),
    Target("durable/execution.py"),
    # The memory ledger: its writes (and the due index's paging), and the copies that keep
    # callers from sharing its records. The test helpers and the other memory ports are out.
    Target("durable/adapters/memory.py", ("copy_run", "copy_step", *_MEMORY_WRITES)),
    # The DynamoDB ledger's writes, through the contract suite on moto in-process; reads
    # (get_run, load, list_runs) and the events mixin (dynamodb_events.py) are out.
    Target("durable/adapters/dynamodb.py", _DYNAMODB_WRITES),
)


def find(path: str) -> Target:
    """The target for ``path`` (``durable/retry.py`` or ``retry``); ``KeyError`` if none."""
    for target in TARGETS:
        if path in (target.path, target.stem, target.module):
            return target
    known = ", ".join(t.path for t in TARGETS)
    raise KeyError(f"{path} is not a mutation target (known: {known})")
