"""The side-effect store contract (idempotency table), on every backend."""

from __future__ import annotations

import threading
import time
from typing import Any

FAR = int(time.time()) + 400 * 86400


def test_begin_persists_the_key_once(effect_store: Any) -> None:
    assert effect_store.begin("k1", FAR) is None
    again = effect_store.begin("k1", FAR)
    assert again is not None and again.status == "INPROGRESS" and again.reference is None


def test_complete_stores_the_reference_for_later_attempts(effect_store: Any) -> None:
    effect_store.begin("k2", FAR)
    effect_store.complete("k2", '{"id":"ch_1"}', FAR)
    later = effect_store.begin("k2", FAR)
    assert later is not None
    assert (later.status, later.reference, later.expiration) == ("COMPLETED", '{"id":"ch_1"}', FAR)


def test_an_expired_record_counts_as_absent(effect_store: Any) -> None:
    effect_store.begin("k3", int(time.time()) - 10)
    assert effect_store.begin("k3", FAR) is None


def test_concurrent_begins_let_exactly_one_caller_proceed(
    effect_store: Any, atomic_backend: None
) -> None:
    results: list[Any] = []
    barrier = threading.Barrier(6)

    def begin() -> None:
        barrier.wait()
        results.append(effect_store.begin("k4", FAR))

    threads = [threading.Thread(target=begin) for _ in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results.count(None) == 1
