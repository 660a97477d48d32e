"""A run's reported progress (``ctx.set_progress``): what it is, how it is checked and kept.

Progress is not a durable operation. It takes no position and writes nothing by itself:
the value the workflow code set last rides in the next write the run makes to its run item
anyway (a lease renewal, a checkpoint, the suspension that parks it, a hand-off, its final
write). So a loop that reports on every item costs nothing, and the value is as fresh as
the run item: at most ``cancel_check_interval`` late while the run starts steps.

- Replay: a value set while the code replays what an earlier invocation recorded is not
  taken (that invocation already stored it or a later one), so the stored value never goes
  back to an older one; values set past the replayed part are new and ride as usual.
- A value set and then the worker crashing before its next write is lost: the run shows the
  value before it until the code, replayed, passes that point again and sets a newer one.
- Continue-as-new starts the successor with no progress; a fork starts with none too.

The stored form is a map ``{"done", "total", "note", "at"}`` with an absent ``total`` or
``note`` left out; every reader reads it through ``progress_view``.
"""

from __future__ import annotations

from typing import Any

from durable.errors import InvalidInput

# A note is a short status line ("fetching supplier 12 of 300"), not a payload.
NOTE_LIMIT = 200
# A count a JSON reader in any language keeps exact (a browser's numbers are doubles).
COUNT_LIMIT = 2**53 - 1


def _count(value: object, field: str) -> int:
    # bool is an int to Python, never a count to a reader.
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(
            f"ctx.set_progress {field}= must be an int, not {type(value).__name__}", field=field
        )
    if not 0 <= value <= COUNT_LIMIT:
        raise InvalidInput(
            f"ctx.set_progress {field}= must be between 0 and {COUNT_LIMIT}, not {value}",
            field=field,
        )
    return value


def progress_value(done: object, total: object, note: object, at: str) -> dict[str, Any]:
    """The stored form of one ``set_progress(done, total, note)`` call made at ``at``, or
    ``InvalidInput`` naming the field that is wrong (nothing is kept then)."""
    counted = _count(done, "done")
    value: dict[str, Any] = {"done": counted}
    if total is not None:
        value["total"] = _count(total, "total")
        if counted > value["total"]:
            raise InvalidInput(
                f"ctx.set_progress done={counted} is more than total={value['total']}",
                field="done",
            )
    if note is not None:
        # A str, not a SecretStr or another object's text: a note is stored and shown as
        # it is (a token in it is redacted at the write boundary, like any stored value).
        if not isinstance(note, str):
            raise InvalidInput(
                f"ctx.set_progress note= must be a str, not {type(note).__name__}", field="note"
            )
        if len(note) > NOTE_LIMIT:
            raise InvalidInput(
                f"ctx.set_progress note= is {len(note)} characters; at most {NOTE_LIMIT}",
                field="note",
            )
        value["note"] = note
    value["at"] = at
    return value


def progress_view(stored: Any) -> dict[str, Any] | None:
    """A stored progress (a map as any ledger returns it: numbers may be ``Decimal``) as
    ``{"done": int, "total": int | None, "note": str | None, "at": str}``, or None."""
    if not isinstance(stored, dict) or "done" not in stored:
        return None
    total = stored.get("total")
    note = stored.get("note")
    return {
        "done": int(stored["done"]),
        "total": None if total is None else int(total),
        "note": None if note is None else str(note),
        "at": str(stored.get("at") or ""),
    }


def stored_progress(stored: Any) -> dict[str, Any] | None:
    """A map read back from storage in the stored form (the one ``progress_value``
    makes: absent keys left out), so a value read back equals the value written."""
    view = progress_view(stored)
    if view is None:
        return None
    return {k: v for k, v in view.items() if v is not None}


def progress_text(progress: Any) -> str:
    """``3/10 (30%) fetching supplier 12``, ``3`` without a total; '' for none."""
    view = progress_view(progress)
    if view is None:
        return ""
    done, total = view["done"], view["total"]
    text = str(done) if total is None else f"{done}/{total}"
    if total:
        text += f" ({done * 100 // total}%)"
    return f"{text} {view['note']}" if view["note"] else text
