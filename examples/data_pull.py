"""Seed 000's paginated data pull: a long loop that checkpoints its cursor every N items,
so a crash or a retry resumes from the last safe boundary instead of the first page."""

from __future__ import annotations

from pydantic import BaseModel

from durable import App, Context, RetryPolicy, current_step

app = App()

PAGE_SIZE = 10
CHECKPOINT_EVERY = 2  # pages


class PullRequest(BaseModel):
    source: str
    total_items: int


class PullResult(BaseModel):
    items: int
    pages_fetched: int
    resumed_from: int


class FakeSource:
    """A paginated API: ``fetch(cursor)`` returns (items, next cursor or None)."""

    def __init__(self) -> None:
        self.fetches = 0
        self.fail_at_page: int | None = None

    def fetch(self, total: int, cursor: int) -> tuple[list[int], int | None]:
        if self.fail_at_page is not None and cursor // PAGE_SIZE == self.fail_at_page:
            self.fail_at_page = None
            raise ConnectionError("page fetch timed out (simulated)")
        self.fetches += 1
        items = list(range(cursor, min(cursor + PAGE_SIZE, total)))
        nxt = cursor + PAGE_SIZE
        return items, (nxt if nxt < total else None)


source = FakeSource()


@app.step(retry=RetryPolicy(max_attempts=5))
def pull_all(request: PullRequest) -> PullResult:
    step = current_step()
    state = step.checkpoint_state or {"cursor": 0, "count": 0}
    resumed_from = int(state["cursor"])
    cursor: int | None = resumed_from
    count = int(state["count"])
    pages = 0
    while cursor is not None:
        items, cursor = source.fetch(request.total_items, cursor)
        count += len(items)
        pages += 1
        if cursor is not None and pages % CHECKPOINT_EVERY == 0:
            step.checkpoint({"cursor": cursor, "count": count})
    return PullResult(items=count, pages_fetched=pages, resumed_from=resumed_from)


@app.workflow(name="data-pull")
def data_pull(ctx: Context, request: PullRequest) -> PullResult:
    return pull_all(request)
