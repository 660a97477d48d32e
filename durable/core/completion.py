"""When a batch of branches (``ctx.parallel``, ``ctx.map``) is decided, and what it returns.

The rule is one pure function of the branches' outcomes so far, shared by the first
execution and every replay: a batch stops starting and waiting for branches the moment
the rule is decided, and the decision record keeps the outcome of each branch, so what a
replay returns never depends on which thread finished first.

Rules are monotonic: once decided by some outcomes, more outcomes never change the
answer. The first execution relies on this: branches already inside a step body when the
rule is decided finish it, and their late outcomes are recorded without changing ``ok``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from durable.errors import DurableError, InvalidInput

T = TypeVar("T")

ItemStatus = Literal["succeeded", "failed", "canceled"]

_PERCENT = re.compile(r"^(\d{1,3}(?:\.\d+)?)%$")


@dataclass(frozen=True, slots=True)
class Completion:
    """Which outcomes decide a batch. Build one with the class methods, or pass
    ``completion="all"`` / ``"first_successful"`` / ``{"min_successful": 2}`` /
    ``{"tolerated_failures": 1}`` / ``{"tolerated_failures": "10%"}``."""

    kind: Literal["all", "min_successful", "tolerated_failures"] = "all"
    count: int = 0
    percent: float | None = None

    @classmethod
    def all(cls) -> Completion:
        """Every branch must succeed (the default); the first failure decides (failed)."""
        return cls("all")

    @classmethod
    def first_successful(cls) -> Completion:
        """The first branch to succeed decides; the rest are canceled."""
        return cls("min_successful", 1)

    @classmethod
    def min_successful(cls, n: int) -> Completion:
        """``n`` successes decide (ok); too few branches left to reach ``n`` decides (failed)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InvalidInput(
                f"completion min_successful={n!r}: give a whole number of branches, 1 or more",
                field="completion",
            )
        return cls("min_successful", n)

    @classmethod
    def tolerated_failures(cls, n: int | str) -> Completion:
        """Up to ``n`` failures (a count, or a share such as ``"10%"`` of the branches)
        are tolerated; one more decides (failed); every branch finished decides (ok)."""
        if isinstance(n, str):
            match = _PERCENT.match(n.strip())
            if match is None or float(match.group(1)) > 100:
                raise InvalidInput(
                    f"completion tolerated_failures={n!r}: give a count (2) or a share "
                    'between 0% and 100% ("10%")',
                    field="completion",
                )
            return cls("tolerated_failures", percent=float(match.group(1)))
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise InvalidInput(
                f"completion tolerated_failures={n!r}: give a count of 0 or more, or a share "
                'such as "10%"',
                field="completion",
            )
        return cls("tolerated_failures", n)

    def describe(self) -> str:
        """The rule as one line, stored in the decision record and shown by the console."""
        if self.kind == "all":
            return "all"
        if self.kind == "min_successful":
            return f"min_successful={self.count}"
        if self.percent is not None:
            return f"tolerated_failures={self.percent:g}%"
        return f"tolerated_failures={self.count}"

    def tolerated(self, total: int) -> int:
        """How many failures the batch of ``total`` branches may have and still succeed."""
        if self.kind == "all":
            return 0
        if self.kind == "min_successful":
            return total - self.count
        if self.percent is not None:
            # Rounded down (10% of 15 tolerates 1), after a nudge for binary fractions:
            # 18.4% of 375 is 69 exactly, which floats compute as 68.99999999999999.
            return int(total * self.percent / 100 + 1e-9)
        return self.count

    def decide(self, total: int, succeeded: int, failed: int) -> bool | None:
        """True (ok) or False (failed) once decided by these counts; None while open.

        Branches not yet counted (running, parked, not started, canceled) may still
        succeed or fail as far as this rule knows."""
        if failed > self.tolerated(total):
            return False
        if self.kind == "min_successful":
            return True if succeeded >= self.count else None
        return True if succeeded + failed == total else None


def parse_completion(value: Any) -> Completion:
    """``completion=`` as given by the caller; a clear error for anything else."""
    if value is None or value == "all":
        return Completion.all()
    if isinstance(value, Completion):
        return value
    if value == "first_successful":
        return Completion.first_successful()
    if isinstance(value, dict) and len(value) == 1:
        [(key, n)] = value.items()
        if key == "min_successful":
            return Completion.min_successful(n)
        if key == "tolerated_failures":
            return Completion.tolerated_failures(n)
    raise InvalidInput(
        f'completion={value!r} is not a rule: use "all" (the default), '
        '"first_successful", {"min_successful": n}, {"tolerated_failures": n} or '
        '{"tolerated_failures": "10%"} (or durable.Completion.min_successful(n), ...)',
        field="completion",
    )


def check_batch_size(total: int, what: str, limit: int) -> None:
    """An inline batch records every branch's outcome in one item: cap its size."""
    if total > limit:
        raise InvalidInput(
            f"{what} has {total} branches; an inline batch takes at most {limit} (its "
            "decision is one ledger item): pass distributed=True with a registered "
            "workflow as the map's function (each item a child run), or process the "
            f"items in chunks of at most {limit}",
            field="items",
        )


class BranchFailed(DurableError):
    """A branch of a batch raised an error that is not a step failure; the batch
    records its type and message, and this is what ``BatchResult`` gives back for it
    (on the first execution and on replay alike)."""

    def __init__(self, index: int, error_type: str, message: str) -> None:
        super().__init__(f"branch {index} failed: {error_type}: {message}")
        self.index = index
        self.error_type = error_type
        self.error_message = message


class BatchFailed(DurableError):
    """``BatchResult.values()`` on a batch whose completion rule failed: the error of
    the lowest-numbered failed branch is the cause (``__cause__`` and ``.error``)."""

    def __init__(self, name: str, rule: str, failed: int, total: int, error: BaseException) -> None:
        super().__init__(
            f"batch {name!r} failed its completion rule ({rule}): {failed} of {total} "
            f"branch(es) failed; first error: {error}"
        )
        self.error = error


CompletionReason = Literal["all_completed", "min_successful_reached", "failure_tolerance_exceeded"]


@dataclass(frozen=True, slots=True)
class BatchItem(Generic[T]):
    """One branch's outcome: ``value`` when it succeeded, ``error`` when it failed,
    neither when it was canceled (the rule was decided before it finished)."""

    index: int
    status: ItemStatus
    value: T | None = None
    error: BaseException | None = None
    # The branch's name as recorded: a parallel branch's function name (or ``branch_names``),
    # a map item's ``item_name`` (by default the item itself when it is a short text or
    # number, else "item N"); None in a decision recorded before names were.
    name: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"


@dataclass(frozen=True, slots=True)
class BatchResult(Generic[T]):
    """What ``ctx.parallel`` and ``ctx.map`` return: one ``BatchItem`` per branch, in
    branch (item) order, whatever order they finished in."""

    name: str
    rule: str
    ok: bool
    items: tuple[BatchItem[T], ...]

    def __iter__(self) -> Iterator[BatchItem[T]]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> BatchItem[T]:
        return self.items[index]

    def values(self) -> list[T]:
        """The values of the branches that succeeded, in branch order. Raises
        ``BatchFailed`` (caused by the first failed branch's error) when the rule failed."""
        if not self.ok:
            failures = [i for i in self.items if i.status == "failed"]
            first = failures[0].error if failures else None
            error = first or DurableError("the batch was canceled before it was decided")
            raise BatchFailed(self.name, self.rule, len(failures), len(self.items), error) from (
                error
            )
        return [i.value for i in self.items if i.status == "succeeded"]  # type: ignore[misc]

    @property
    def completion_reason(self) -> CompletionReason:
        """Why the batch was decided, from its recorded outcome (so a replay says the same):
        ``"all_completed"`` (every branch ended), ``"min_successful_reached"`` (the rule
        was met with branches still open, which were canceled) or
        ``"failure_tolerance_exceeded"`` (more failed than the rule tolerates)."""
        if not self.ok:
            return "failure_tolerance_exceeded"
        if any(i.status == "canceled" for i in self.items):
            return "min_successful_reached"
        return "all_completed"

    @property
    def succeeded(self) -> list[BatchItem[T]]:
        return [i for i in self.items if i.status == "succeeded"]

    @property
    def failed(self) -> list[BatchItem[T]]:
        return [i for i in self.items if i.status == "failed"]

    @property
    def canceled(self) -> list[BatchItem[T]]:
        return [i for i in self.items if i.status == "canceled"]

    def errors(self) -> Sequence[BaseException]:
        return [i.error for i in self.items if i.error is not None]


def check_max_concurrency(max_concurrency: Any) -> None:
    """``max_concurrency`` of a batch or a map: None (the default) or a whole number >= 1."""
    if max_concurrency is not None and (
        isinstance(max_concurrency, bool)
        or not isinstance(max_concurrency, int)
        or max_concurrency < 1
    ):
        raise InvalidInput(
            f"max_concurrency={max_concurrency!r}: give a whole number of branches, 1 or more "
            "(or None for the default)",
            field="max_concurrency",
        )
