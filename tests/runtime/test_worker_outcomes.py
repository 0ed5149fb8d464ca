"""What a handler's end does to its message, in real worker processes (SPEC rule 23)."""

from __future__ import annotations

import time

import hailq

from .conftest import StartWorker
from .support import done, rows, started, wait_for

CLAIMS = {"lease": 2, "max_attempts": 3, "retry": {"base": 0.05, "jitter": 0}}


def test_retry_gives_the_message_back_after_the_handlers_delay(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    claims = broker.queue("claims", **CLAIMS)
    claims.send({"n": 1, "do": "retry_first", "delay": 0.8})
    start_worker("handlers:app", "-q", "claims")
    wait_for(lambda: done(effects), what="the retried message to be done")
    (first, second) = rows(effects, "SELECT attempt, at FROM events ORDER BY seq")
    assert (first[0], second[0]) == (1, 2)
    assert second[1] - first[1] >= 0.75


def test_dead_letter_moves_the_message_to_the_dead_letters_now(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    claims = broker.queue("claims", **CLAIMS)
    claims.send({"n": 2, "do": "dead"})
    start_worker("handlers:app", "-q", "claims")
    dead = wait_for(claims.dead_letters, what="the dead letter")
    assert dead[0].body == {"n": 2, "do": "dead"}
    assert dead[0].last_error == "claim 2 is malformed"
    assert len(started(effects)) == 1  # attempts were left, but it was not retried


def test_poison_claim_is_retried_with_tracebacks_and_dies_while_others_flow(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    claims = broker.queue("claims", **CLAIMS)
    claims.send({"n": 3, "do": "raise"})
    claims.send_many([{"n": n} for n in range(10, 30)])
    start_worker("handlers:app", "-q", "claims", "-c", "2")
    dead = wait_for(claims.dead_letters, what="the poison claim to die")
    wait_for(lambda: len(done(effects)) == 20, what="the good claims to be done")
    assert done(effects) == list(range(10, 30))
    errors = [e.error for e in dead[0].errors]
    assert len(errors) == 3  # max_attempts
    for error in errors:
        assert error.startswith("Traceback (most recent call last)")
        assert "in _finish" in error
        assert error.endswith("ValueError: boom in claim 3")
        assert len(error) <= 2000
    attempts = [a for n, a, *_ in started(effects) if n == 3]
    assert attempts == [1, 2, 3]


def test_an_error_text_no_database_can_store_is_kept_escaped_and_the_slot_goes_on(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    claims = broker.queue("claims", **CLAIMS)
    claims.send({"n": 4, "do": "raise_undecodable"})
    start_worker("handlers:app", "-q", "claims", "-c", "1")
    wait_for(lambda: done(effects) == [4], what="the retry after the odd error")
    claims.send_many([{"n": n} for n in range(40, 45)])  # the one slot is still working
    wait_for(lambda: len(done(effects)) == 6, what="the claims after it")
    attempts = [a for n, a, *_ in started(effects) if n == 4]
    assert attempts == [1, 2]
    stats = claims.stats()
    assert (stats.nacked, stats.dead) == (1, 0)  # its nack was recorded, with the backoff


def test_async_handlers_run_concurrently_on_one_event_loop(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    queue = broker.queue("async-claims", **CLAIMS)
    queue.send_many([{"n": n, "sleep": 0.5} for n in range(20)])
    begun = time.monotonic()
    start_worker("handlers:app", "-q", "async-claims", "--concurrency", "10")
    wait_for(lambda: len(done(effects)) == 20, what="the async handlers")
    elapsed = time.monotonic() - begun
    assert done(effects) == list(range(20))
    assert {thread for *_, thread, _ in started(effects)} == {"hailq-asyncio"}
    assert elapsed < 8  # twenty half-second handlers, ten at a time (plus start-up)


def test_async_handler_failure_is_a_nack_with_its_own_traceback(
        broker: hailq.Broker, start_worker: StartWorker, effects: str) -> None:
    queue = broker.queue("async-claims", **CLAIMS)
    queue.send({"n": 4, "do": "raise_first"})
    start_worker("handlers:app", "-q", "async-claims")
    wait_for(lambda: done(effects), what="the second attempt")
    assert [a for _, a, *_ in started(effects)] == [1, 2]
    assert queue.stats().nacked == 1
