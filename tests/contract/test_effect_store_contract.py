"""The side-effect store contract (idempotency table), on every backend."""

from __future__ import annotations

import threading
from typing import Any

# Expiry is judged on the engine's clock, which callers pass in: any fixed epoch works.
NOW = 1_767_225_600  # 2026-01-01
FAR = NOW + 400 * 86400


def test_begin_persists_the_key_once(effect_store: Any) -> None:
    assert effect_store.begin("k1", FAR, now=NOW) is None
    again = effect_store.begin("k1", FAR, now=NOW)
    assert again is not None and again.status == "INPROGRESS" and again.reference is None


def test_complete_stores_the_reference_for_later_attempts(effect_store: Any) -> None:
    effect_store.begin("k2", FAR, now=NOW)
    effect_store.complete("k2", '{"id":"ch_1"}', FAR)
    later = effect_store.begin("k2", FAR, now=NOW)
    assert later is not None
    assert (later.status, later.reference, later.expiration) == ("COMPLETED", '{"id":"ch_1"}', FAR)


def test_an_expired_record_counts_as_absent(effect_store: Any) -> None:
    effect_store.begin("k3", NOW - 10, now=NOW - 20)
    assert effect_store.begin("k3", FAR, now=NOW) is None


def test_expiry_is_judged_at_the_time_the_caller_gives(effect_store: Any) -> None:
    """GIVEN a record that expires at NOW
    WHEN a later attempt asks at NOW (the engine's clock, whatever the wall clock says)
    THEN it is found; one second later it counts as absent."""
    assert effect_store.begin("k5", NOW, now=NOW - 100) is None
    found = effect_store.begin("k5", FAR, now=NOW)
    assert found is not None and found.expiration == NOW
    assert effect_store.begin("k5", FAR, now=NOW + 1) is None


def test_concurrent_begins_let_exactly_one_caller_proceed(
    effect_store: Any, atomic_backend: None
) -> None:
    results: list[Any] = []
    barrier = threading.Barrier(6)

    def begin() -> None:
        barrier.wait()
        results.append(effect_store.begin("k4", FAR, now=NOW))

    threads = [threading.Thread(target=begin) for _ in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results.count(None) == 1
