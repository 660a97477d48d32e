"""Listing runs by workflow or by a person's attention (``Ledger.list_runs``).

The listing index's sort key holds a run's phase (``durable.core.leases.listing_key``):
a listing of a status reads the phase that holds it, a key range a query reads in order,
then the first layout's prefixes a table upgraded in place may still hold. One cursor
walks them all: the key it stops at says which range it is in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from durable.adapters.dynamodb_items import ATTENTION_PK, item_to_run, list_pk
from durable.adapters.dynamodb_support import (
    BAD_CURSOR,
    Expr,
    decode_cursor,
    encode_cursor,
    n,
    s,
    storage_error,
)
from durable.adapters.dynamodb_table import TableBase
from durable.core.leases import (
    LEGACY_OPEN_LISTINGS,
    OPEN_LISTING,
    check_listing,
    listed,
    listing_prefixes,
)
from durable.core.model import RunRecord
from durable.core.ports import Page
from durable.errors import InvalidCursor


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
            index = "attention-index"
            cursor_keys: tuple[str, ...] = ("pk", "sk", "attention_pk", "updated_at")
            cursor_expect = {"attention_pk": ATTENTION_PK}
            prefixes: tuple[str | None, ...] = (None,)
        else:
            index = "list-index"
            cursor_keys = ("pk", "sk", "list_pk", "list_sk")
            cursor_expect = {"list_pk": list_pk(str(workflow))}
            prefixes = listing_prefixes(status) or (None,)
        filters = _Filters(workflow, status, needs_attention, version)
        return self._walk(index, cursor_keys, cursor_expect, prefixes, filters, limit, cursor)

    def open_runs(
        self, workflow: str, *, limit: int = 100, cursor: str | None = None
    ) -> Page[RunRecord]:
        # The open phase and the first layout's unfinished prefixes hold every unfinished
        # run and no ended one (an end moves a run's key to ``done#``): no status filter,
        # so a run a worker claims or suspends meanwhile stays in the range being read.
        return self._walk(
            "list-index",
            ("pk", "sk", "list_pk", "list_sk"),
            {"list_pk": list_pk(workflow)},
            (OPEN_LISTING, *LEGACY_OPEN_LISTINGS),
            _Filters(workflow, None, None, None),
            limit,
            cursor,
        )

    def _walk(
        self,
        index: str,
        cursor_keys: tuple[str, ...],
        cursor_expect: dict[str, str],
        prefixes: tuple[str | None, ...],
        filters: _Filters,
        limit: int,
        cursor: str | None,
    ) -> Page[RunRecord]:
        """Up to ``limit`` runs of ``prefixes``' key ranges in turn, from ``cursor`` on."""
        start = decode_cursor(cursor, cursor_keys, cursor_expect)
        items: list[RunRecord] = []
        last: dict[str, Any] | None = None  # the key of the last item taken
        first = _range_of(start, prefixes)
        for i in range(first, len(prefixes)):
            query = filters.request(self.table, index, prefixes[i])
            while len(items) < limit:
                query["Limit"] = limit - len(items)
                if start:
                    query["ExclusiveStartKey"] = start
                try:
                    response = self.client.query(**query)
                except Exception as err:
                    storage_error(err, "listing runs")
                for raw in response.get("Items", []):
                    items.append(listed(item_to_run(raw)))
                    last = {k: raw[k] for k in cursor_keys}
                start = response.get("LastEvaluatedKey")
                if not start:
                    break
            if len(items) >= limit:
                # Full: the next page starts where this query stopped, or after the last
                # item taken when its range ended with it and another range follows.
                if not start and i + 1 < len(prefixes):
                    start = last
                break
            start = None
        return Page(items, encode_cursor(start))


def _range_of(start: dict[str, Any] | None, prefixes: tuple[str | None, ...]) -> int:
    """Which of the listing's key ranges a cursor stopped in (its ``list_sk`` says)."""
    if start is None or prefixes == (None,):
        return 0
    at = start["list_sk"]["S"]
    for i, prefix in enumerate(prefixes):
        if prefix is not None and at.startswith(prefix):
            return i
    raise InvalidCursor(BAD_CURSOR)


@dataclass(frozen=True, slots=True)
class _Filters:
    """One listing's query of one key range: the key condition and the filters."""

    workflow: str | None
    status: str | None
    needs_attention: bool | None
    version: int | None

    def request(self, table: str, index: str, prefix: str | None) -> dict[str, Any]:
        e = Expr()
        filters: list[str] = []
        if self.needs_attention:
            key = f"{e.name('attention_pk')} = {e.value(s(ATTENTION_PK), 'pk')}"
            if self.workflow is not None:
                filters.append(f"{e.name('workflow')} = {e.value(s(self.workflow), 'wf')}")
        else:
            key = f"{e.name('list_pk')} = {e.value(s(list_pk(str(self.workflow))), 'pk')}"
            if prefix is not None:  # one range of the listing (``listing_prefixes``)
                key += f" AND begins_with({e.name('list_sk')}, {e.value(s(prefix), 'ph')})"
            if self.needs_attention is False:
                na = e.name("needs_attention")
                filters.append(
                    f"(attribute_not_exists({na}) OR {na} = {e.value({'BOOL': False}, 'na')})"
                )
        if self.status is not None:  # a range holds several statuses: a filter picks one
            filters.append(f"{e.name('status')} = {e.value(s(self.status), 'st')}")
        if self.version is not None:
            filters.append(f"{e.name('version')} = {e.value(n(self.version), 'ver')}")
        built: dict[str, Any] = {
            "TableName": table,
            "IndexName": index,
            "KeyConditionExpression": key,
            "ScanIndexForward": False,
            **e.kwargs(),
        }
        if filters:
            built["FilterExpression"] = " AND ".join(filters)
        return built
