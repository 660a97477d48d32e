"""Identifiers: ULIDs for runs and signals, derived ids for idempotent starts."""

from __future__ import annotations

import hashlib
import os
from datetime import datetime
from typing import Any

from durable.core.tokens import refuse_token
from durable.errors import InvalidInput

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _base32(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, rem = divmod(value, 32)
        chars.append(_CROCKFORD[rem])
    return "".join(reversed(chars))


def time_token(now: datetime) -> str:
    """Milliseconds since the epoch in 10 sortable base-32 characters (a ULID's first 10)."""
    return _base32(int(now.timestamp() * 1000), 10)


def new_ulid(now: datetime) -> str:
    """A ULID: 48-bit millisecond time then 80 random bits, 26 sortable characters."""
    randomness = int.from_bytes(os.urandom(10), "big")
    return time_token(now) + _base32(randomness, 16)


# One rule for every idempotency key (a start's, a signal's): it travels in an HTTP
# header, where control characters cannot be sent faithfully.
MAX_KEY_CHARS = 256


def has_control_characters(text: str) -> bool:
    """C0 and C1 controls and DEL: they cannot travel in a header or a schedule name."""
    return any(ord(c) < 32 or 127 <= ord(c) < 160 for c in text)


def check_idempotency_key(key: Any, field: str) -> str:
    """Refuse an empty, overlong or control-character key, or one holding a callback
    token (a key is stored in clear: ``durable.core.tokens.refuse_token``), naming ``field``."""
    if not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY_CHARS:
        raise InvalidInput(f"{field} must be 1-{MAX_KEY_CHARS} characters, not blank", field=field)
    if has_control_characters(key):
        raise InvalidInput(f"{field} must not contain control characters", field=field)
    refuse_token(key, field, carrier="the input or payload it goes with")
    return key


# The namespaces of the keys that senders and the engine give runs, and whose they are. A
# run shows its key with the namespace (``sqs/<message id>``, ``eventbridge/<event id>``,
# ``schedule/<name>/<time>``, ``hook:<workflow>/<key>``), and a key a run shows names
# exactly that run (``run_id_for_key``): so nobody else may give a key in one of them.
SENDER_SCOPES = {
    "sqs": "the SQS route's",
    "eventbridge": "the EventBridge route's",
    "schedule": "a schedule's fires'",
}
SCHEDULE_SCOPE = "schedule"
HOOK_PREFIX = "hook:"


def hook_scope(workflow: str) -> str:
    """The namespace of the keys of the webhook that starts ``workflow``."""
    return f"{HOOK_PREFIX}{workflow}"


def reserved_prefix(key: str) -> tuple[str, str] | None:
    """The reserved namespace ``key`` begins with, and whose it is; None: a key of one's own."""
    if key.startswith(HOOK_PREFIX):
        return HOOK_PREFIX, "the webhooks'"
    for scope, owner in SENDER_SCOPES.items():
        if key.startswith(f"{scope}/"):
            return f"{scope}/", owner
    return None


def check_user_key(key: Any, field: str) -> str:
    """``check_idempotency_key`` for a key given as one's own (an operator's, a start from
    code, a keyed child's ``id=``): one in a sender's or the engine's namespace is refused,
    as the run it started would show the same key as that route's run."""
    text = check_idempotency_key(key, field)
    reserved = reserved_prefix(text)
    if reserved is not None:
        prefix, owner = reserved
        raise InvalidInput(
            f"{field} {text!r}: keys beginning with {prefix!r} are {owner} (runs started "
            "there show their key so); choose another key",
            field=field,
        )
    return text


def check_key_scope(workflow: str, scope: str) -> str:
    """A sender's namespace for a start of ``workflow``: one of ``SENDER_SCOPES``, or the
    workflow's own webhook's. Any other would show keys nobody can tell from another's."""
    if scope in SENDER_SCOPES or scope == hook_scope(workflow):
        return scope
    refuse_token(scope, "key_scope", "key scope")  # before the message that repeats it
    known = ", ".join(repr(s) for s in [*SENDER_SCOPES, hook_scope(workflow)])
    raise InvalidInput(f"key_scope must be one of {known}, not {scope!r}", field="key_scope")


def keyed_run(workflow: str, key: str, scope: str | None) -> tuple[str, str]:
    """The run id a start of ``workflow`` under ``key`` in ``scope`` derives, and the key
    that run shows (with its namespace)."""
    if scope is None:
        return derived_run_id(workflow, key), key
    shown = f"{scope}/{key}"
    if scope == SCHEDULE_SCOPE:
        # A fire's id has always been derived from the key it shows, unscoped: kept, so a
        # fire Scheduler delivers again across an upgrade finds the run it started.
        return derived_run_id(workflow, shown), shown
    return derived_run_id(workflow, key, scope), shown


def run_id_for_key(workflow: str, shown: str) -> str | None:
    """The id of the one run of ``workflow`` that can show the key ``shown``: a key in a
    reserved namespace is that route's (a webhook's only for the workflow's own hook),
    any other is one given as one's own. None: no run can show it."""
    if shown.startswith(HOOK_PREFIX):
        scope = hook_scope(workflow)
        given = shown.removeprefix(f"{scope}/") if shown.startswith(f"{scope}/") else ""
        return keyed_run(workflow, given, scope)[0] if given else None
    reserved = reserved_prefix(shown)
    if reserved is None:
        return derived_run_id(workflow, shown)
    given = shown[len(reserved[0]) :]
    return keyed_run(workflow, given, reserved[0][:-1])[0] if given else None


def next_keyed_run_id(workflow: str, shown: str, after: str) -> str:
    """The id of the run a key of one's own names once the run ``after`` it named has
    ended and a start asks for a new one (``reuse="after_end"``). Derived from the run
    before, so every start that saw ``after`` end tries to create the same run, and the
    conditional create lets exactly one of them. Its scope holds a run id, which no
    sender's or child's scope can be."""
    return derived_run_id(workflow, shown, f"after/{after}")


def derived_run_id(workflow: str, idempotency_key: str, scope: str | None = None) -> str:
    """Deterministic 26-character id from (workflow, key): the run item's put dedupes.

    ``scope`` gives a caller (a sender, an unkeyed child) keys of its own: keys hold no
    control characters (``check_idempotency_key``), so a scoped key's text can never be
    an unscoped one's. Which run a key as a run shows it names: ``run_id_for_key``."""
    text = f"{workflow}\x00{idempotency_key}"
    if scope is not None:
        text = f"{workflow}\x00{scope}\x00{idempotency_key}"
    digest = hashlib.sha256(text.encode()).digest()
    return _base32(int.from_bytes(digest[:17], "big") >> 6, 26)


def key_shard(run_id: str, shards: int) -> int:
    """Which of ``shards`` partitions an index entry of ``run_id`` goes to: a hash of the
    id, so a run's entries always land on the same one and a burst of runs (one
    workflow's, one failure storm's) spreads evenly over all of them."""
    return int(hashlib.md5(run_id.encode(), usedforsecurity=False).hexdigest()[:8], 16) % shards


# The due index's shards, by default. It is shared by every workflow, its sort key is a
# time, and a run writes about 4 units there (its create, a sleep's move, its end): at 4
# shards, 1,000 runs a second put each at a partition's limit of about 1,000 units a second
# (docs/performance.md, "Capacity"). Raising the count on a live table is safe (the
# sweeper reads every shard below it, so a run keyed under the old count is still found);
# lowering it hides the runs keyed above it.
DUE_SHARDS = 8


def due_shard(run_id: str, shards: int) -> str:
    """The due index's partition for a run: spreads sweeper reads over ``shards`` keys."""
    return str(key_shard(run_id, shards))


def timer_name(run_id: str, position: str, rearm_at: datetime | None = None) -> str:
    """A schedule name, ``[0-9A-Za-z_.-]{1,64}``: deterministic per wait, so arming twice
    is harmless; a re-arm after an early wake-up gets a fresh name (its time)."""
    name = f"{run_id}-{position}"
    if rearm_at is not None:
        name += f"-r{int(rearm_at.timestamp())}"
    return name
