"""Listing runs by workflow or by a person's attention (``Ledger.list_runs``).

Both indexes are sharded (``durable.core.leases.listing_partition``,
``attention_partition``): a listing queries each shard newest first and merges them, so
its order is the one a single partition would give. Its cursor holds where it stopped in
each shard. The listing index holds keys only: the listed fields come from the run items
of the page, one BatchGetItem, and so does the status a filter picks (an unfinished
status is read from the ``open#`` phase only, a finished one from ``done#``:
``listing_phase``). The attention index projects the listed fields and is read as it is.
"""

from __future__ import annotations

import hashlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from durable.adapters.dynamodb_items import RUN_SK, item_to_run, run_pk
from durable.adapters.dynamodb_support import (
    BAD_CURSOR,
    Expr,
    cursor_data,
    cursor_text,
    n,
    s,
    storage_error,
)
from durable.adapters.dynamodb_table import TableBase
from durable.core.leases import (
    OPEN_LISTING,
    PAGE_FIELDS,
    attention_partitions,
    check_listing,
    listed,
    listing_partitions,
    listing_phase,
)
from durable.core.model import RunRecord
from durable.core.ports import Page
from durable.errors import InvalidCursor, StorageError

LISTING_INDEX, ATTENTION_INDEX = "listing-index", "attention-index"
# BatchGetItem's most keys, and how often keys DynamoDB leaves unprocessed are asked again.
_BATCH_GET, _BATCH_GET_ROUNDS, _BATCH_GET_PAUSE = 100, 8, 0.05
# The most index entries one page looks at. A listing that filters (a status, a version)
# reads each entry's run item to decide, so a rare status among many ended runs would read
# them all in one request: the API's time and the read units grow with the table. Past
# this a page ends short, with a cursor, as a DynamoDB query with a filter does.
MAX_EXAMINED = 1000
# A cursor names the listing it came from, and where it stopped in each shard: after the
# entry ``[run id, sort key]``, not started (None) or at the shard's end (False).
Position = list[str] | None | bool


@dataclass(frozen=True, slots=True)
class _Listing:
    """One listing: which index, which partitions it merges, which key range, and which
    runs it keeps of what it reads."""

    index: str
    hash_key: str
    range_key: str
    partitions: tuple[str, ...]
    phase: str | None
    # A FilterExpression on the index's projection (the attention index's), built in a
    # query's own expression.
    filters: Callable[[Expr], str | None]
    keep: Callable[[RunRecord], bool]

    @property
    def name(self) -> str:
        """What a cursor of this listing must name (another listing's is refused): a
        digest, so a long workflow name does not lengthen every cursor."""
        text = f"{self.index}|{self.partitions[0]}|{self.phase or ''}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def keyed_by_run(self) -> bool:
        """Whether the sort key ends with the run id (``listing_key``): a cursor then
        holds the sort key alone."""
        return self.range_key == "list_sk"


@dataclass(slots=True)
class _Shard:
    """One partition's stream: the entries read and not yet taken, where its next query
    starts, and where the page being built stopped in it."""

    partition: str
    at: Position
    buffer: deque[dict[str, Any]] = field(default_factory=deque)
    start: dict[str, Any] | None = None
    done: bool = False

    def head(self, range_key: str) -> tuple[str, str]:
        raw = self.buffer[0]
        return raw[range_key]["S"], raw["pk"]["S"]


class ListingMixin(TableBase):
    def list_runs(
        self,
        *,
        workflow: str | None = None,
        status: str | None = None,
        needs_attention: bool | None = None,
        version: int | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[RunRecord]:
        check_listing(workflow, needs_attention)
        if needs_attention:

            def filters(e: Expr) -> str | None:
                parts = []
                if workflow is not None:
                    parts.append(f"{e.name('workflow')} = {e.value(s(workflow), 'wf')}")
                if status is not None:
                    parts.append(f"{e.name('status')} = {e.value(s(status), 'st')}")
                if version is not None:
                    parts.append(f"{e.name('version')} = {e.value(n(version), 'ver')}")
                return " AND ".join(parts) or None

            listing = _Listing(
                ATTENTION_INDEX,
                "attention_pk",
                "updated_at",
                attention_partitions(),
                None,
                filters,
                lambda run: True,
            )
            return self._walk(listing, limit, cursor)

        def keep(run: RunRecord) -> bool:
            return (
                (status is None or run.status.value == status)
                and (version is None or run.version == version)
                and (needs_attention is None or not run.needs_attention)
            )

        return self._walk(
            self._by_workflow(str(workflow), listing_phase(status), keep), limit, cursor
        )

    def open_runs(
        self, workflow: str, *, limit: int = 100, cursor: str | None = None
    ) -> Page[RunRecord]:
        # The open phase holds every unfinished run and no ended one (an end moves a run's
        # key to ``done#``), and a claim or a suspension leaves its entry where it is: a
        # run a worker moves meanwhile stays in the range being read. One that ended since
        # the index was read is left out by its run item.
        listing = self._by_workflow(workflow, OPEN_LISTING, lambda run: not run.terminal)
        return self._walk(listing, limit, cursor)

    def _by_workflow(
        self, workflow: str, phase: str | None, keep: Callable[[RunRecord], bool]
    ) -> _Listing:
        return _Listing(
            LISTING_INDEX,
            "listing_pk",
            "list_sk",
            listing_partitions(workflow),
            phase,
            lambda e: None,
            keep,
        )

    def _walk(self, listing: _Listing, limit: int, cursor: str | None) -> Page[RunRecord]:
        """Up to ``limit`` runs of ``listing``, from ``cursor`` on: the shards' entries
        merged newest first, taken a page's worth at a time, the runs ``keep`` refuses left
        out until the page is full or every shard is read."""
        at = _decode(cursor, listing)
        shards = [
            _Shard(p, pos, done=pos is False) for p, pos in zip(listing.partitions, at, strict=True)
        ]
        for shard in shards:
            if isinstance(shard.at, list):
                shard.start = _start_key(listing, shard.partition, shard.at)
        chunk = max(4, 2 * -(-limit // len(shards)))  # a shard's share of a page, twice over
        items: list[RunRecord] = []
        examined = 0
        while len(items) < limit and examined < MAX_EXAMINED:
            want = min(limit - len(items), MAX_EXAMINED - examined)
            taken = self._take(listing, shards, want, chunk)
            if not taken:
                break
            examined += len(taken)
            runs = (
                [item_to_run(raw) for raw in taken]
                if listing.index == ATTENTION_INDEX
                else self._runs_of(taken)
            )
            items += [listed(run) for run in runs if listing.keep(run)]
        more = any(shard.buffer or not shard.done for shard in shards)
        return Page(items, _encode(listing, shards) if more else None)

    def _take(
        self, listing: _Listing, shards: list[_Shard], want: int, chunk: int
    ) -> list[dict[str, Any]]:
        """The next ``want`` entries of the merged shards, newest first; each shard's
        position moves past the ones taken from it."""
        taken: list[dict[str, Any]] = []
        while len(taken) < want:
            for shard in shards:
                while not shard.buffer and not shard.done:
                    self._read(listing, shard, chunk)
            live = [sh for sh in shards if sh.buffer]
            if not live:
                break
            best = max(live, key=lambda sh: sh.head(listing.range_key))
            raw = best.buffer.popleft()
            best.at = [raw["pk"]["S"].removeprefix("RUN#"), raw[listing.range_key]["S"]]
            taken.append(raw)
        return taken

    def _read(self, listing: _Listing, shard: _Shard, chunk: int) -> None:
        """One query of ``shard``, newest first from where it stopped."""
        e = Expr()
        key = f"{e.name(listing.hash_key)} = {e.value(s(shard.partition), 'pk')}"
        if listing.phase is not None:
            range_name = e.name(listing.range_key)
            key += f" AND begins_with({range_name}, {e.value(s(listing.phase), 'ph')})"
        query: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": listing.index,
            "KeyConditionExpression": key,
            "ScanIndexForward": False,
            "Limit": chunk,
        }
        filters = listing.filters(e)
        if filters:
            query["FilterExpression"] = filters
        query.update(e.kwargs())
        if shard.start:
            query["ExclusiveStartKey"] = shard.start
        try:
            response = self.client.query(**query)
        except Exception as err:
            storage_error(err, "listing runs")
        shard.buffer.extend(response.get("Items", []))
        shard.start = response.get("LastEvaluatedKey")
        shard.done = not shard.start

    def _runs_of(self, entries: list[dict[str, Any]]) -> list[RunRecord]:
        """The run items of a page's index entries, in the entries' order (BatchGetItem,
        the listed fields only); a run purged since the index was read is left out."""
        e = Expr()
        projection = ", ".join(e.name(f) for f in PAGE_FIELDS)
        found: dict[str, RunRecord] = {}
        for low in range(0, len(entries), _BATCH_GET):
            keys: list[Any] = [
                {"pk": raw["pk"], "sk": {"S": RUN_SK}} for raw in entries[low : low + _BATCH_GET]
            ]
            for _ in range(_BATCH_GET_ROUNDS):
                request: Any = {"Keys": keys, "ProjectionExpression": projection, **e.kwargs()}
                try:
                    response: Any = self.client.batch_get_item(RequestItems={self.table: request})
                except Exception as err:
                    storage_error(err, "listing runs")
                for item in response.get("Responses", {}).get(self.table, []):
                    run = item_to_run(item)
                    found[run.run_id] = run
                keys = list(response.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", []))
                if not keys:
                    break
                time.sleep(_BATCH_GET_PAUSE)
            else:
                raise StorageError("listing runs: keys left unprocessed; try again", retryable=True)
        ids = [raw["pk"]["S"].removeprefix("RUN#") for raw in entries]
        return [found[i] for i in ids if i in found]


def _start_key(listing: _Listing, partition: str, at: list[str]) -> dict[str, Any]:
    """The ExclusiveStartKey of the entry ``at`` (run id, sort key): the run item's key
    and the index's."""
    run_id, sort = at
    return {
        "pk": s(run_pk(run_id)),
        "sk": s(RUN_SK),
        listing.hash_key: s(partition),
        listing.range_key: s(sort),
    }


def _encode(listing: _Listing, shards: list[_Shard]) -> str:
    at: list[Any] = []
    for shard in shards:
        if shard.done and not shard.buffer:
            at.append(False)
        elif isinstance(shard.at, list):
            at.append(shard.at[1] if listing.keyed_by_run else shard.at)
        else:
            at.append(None)
    return cursor_text({"l": listing.name, "at": at})


def _decode(cursor: str | None, listing: _Listing) -> list[Position]:
    """Where a cursor stopped in each shard, checked to be what this listing could have
    returned: a crafted cursor is ``InvalidCursor``, never a request DynamoDB refuses."""
    fresh: list[Position] = [None] * len(listing.partitions)
    if not cursor:
        return fresh
    data = cursor_data(cursor)
    if not isinstance(data, dict) or set(data) != {"l", "at"} or data["l"] != listing.name:
        raise InvalidCursor(BAD_CURSOR)
    at = data["at"]
    if not isinstance(at, list) or len(at) != len(fresh):
        raise InvalidCursor(BAD_CURSOR)
    return [_position(listing, pos) for pos in at]


def _position(listing: _Listing, pos: Any) -> Position:
    if pos is None or pos is False:
        return pos
    if listing.keyed_by_run and isinstance(pos, str):
        pos = [pos.rpartition("#")[2], pos]
    if not (
        isinstance(pos, list)
        and len(pos) == 2
        and all(isinstance(p, str) and 0 < len(p) <= 1024 for p in pos)
        and pos[1].startswith(listing.phase or "")
    ):
        raise InvalidCursor(BAD_CURSOR)
    return pos
