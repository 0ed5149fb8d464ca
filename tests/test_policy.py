"""Pure policies, tested without a database: retry backoff, the rule-16 sort key, settings."""

from __future__ import annotations

import dataclasses
import json
import math
import random
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hailq import InvalidArgument, QueueSettings, RetryPolicy
from hailq.policy.ordering import sort_key
from hailq.policy.retry import backoff

# -- retry backoff -------------------------------------------------------------------------------


def test_backoff_grows_by_factor_from_base_without_jitter() -> None:
    policy = RetryPolicy(base=0.5, factor=3, max=1000, jitter=0)

    delays = [backoff(policy, attempt) for attempt in range(1, 6)]

    assert delays == [0.5 * 3 ** n for n in range(5)]


def test_backoff_is_capped_at_max() -> None:
    policy = RetryPolicy(base=1, factor=2, max=10, jitter=0)

    assert [backoff(policy, a) for a in (4, 5, 6, 50)] == [8, 10, 10, 10]


def test_backoff_of_a_huge_attempt_number_is_max_not_an_overflow() -> None:
    policy = RetryPolicy(base=1, factor=100, max=300, jitter=0)

    assert backoff(policy, 100_000) == 300


def test_backoff_before_the_first_attempt_is_base() -> None:
    policy = RetryPolicy(base=2, factor=2, max=300, jitter=0)

    assert backoff(policy, 0) == backoff(policy, 1) == 2


def test_backoff_with_factor_one_is_constant() -> None:
    policy = RetryPolicy(base=7, factor=1, max=300, jitter=0)

    assert {backoff(policy, a) for a in range(1, 20)} == {7}


@given(base=st.floats(0.001, 100), factor=st.floats(1, 10), above=st.floats(0, 1000),
       jitter=st.floats(0, 1), attempt=st.integers(1, 200), seed=st.integers(0, 2**32))
def test_backoff_with_jitter_stays_between_the_jittered_share_and_the_full_delay(
        base: float, factor: float, above: float, jitter: float, attempt: int,
        seed: int) -> None:
    cap = base + above
    policy = RetryPolicy(base=base, factor=factor, max=cap, jitter=jitter)
    full = backoff(RetryPolicy(base=base, factor=factor, max=cap, jitter=0), attempt)

    delay = backoff(policy, attempt, random.Random(seed))

    assert full * (1 - jitter) - 1e-9 <= delay <= full + 1e-9
    assert delay <= cap + 1e-9


def test_backoff_jitter_spreads_retries_and_is_reproducible_with_a_seed() -> None:
    policy = RetryPolicy(base=10, factor=2, max=300, jitter=0.5)

    spread = {backoff(policy, 3, random.Random(seed)) for seed in range(50)}
    again = [backoff(policy, 3, random.Random(7)) for _ in range(3)]

    assert len(spread) > 40  # many failures at once do not come back at once
    assert min(spread) >= 20 and max(spread) <= 40
    assert len(set(again)) == 1


# -- the delivery sort key (rule 16) ---------------------------------------------------------------


def test_sort_key_without_aging_is_strict_priority() -> None:
    keys = [sort_key(p, available_at=1_700_000_000 + p * 1000, aging=None) for p in range(10)]

    assert keys == sorted(keys, reverse=True)  # higher priority: smaller key, whenever sent
    assert sort_key(3, 0.0, None) == sort_key(3, 1e9, None)


def test_sort_key_with_aging_trades_one_level_for_aging_seconds() -> None:
    t = 1_700_000_000.0

    assert sort_key(0, t, aging=60) < sort_key(1, t + 61, aging=60)  # old low goes first
    assert sort_key(1, t + 59, aging=60) < sort_key(0, t, aging=60)  # new high goes first
    assert sort_key(0, t, aging=60) < sort_key(9, t + 9 * 60 + 1, aging=60)


@given(p=st.integers(0, 8), step=st.integers(1, 9), t=st.floats(1e9, 2e9),
       aging=st.floats(0.01, 3600), later=st.floats(0, 1e6))
def test_sort_key_old_low_priority_is_never_starved(p: int, step: int, t: float, aging: float,
                                                    later: float) -> None:
    q = min(p + step, 9)
    gap = (q - p) * aging
    margin = 1e-3 * max(1.0, gap)

    newer_by_more = sort_key(p, t, aging) < sort_key(q, t + gap + margin + later, aging)
    newer_by_less = sort_key(q, t + max(gap - margin, 0.0) * (1 - 1e-9), aging) < sort_key(
        p, t, aging)

    assert newer_by_more
    assert newer_by_less


# -- queue settings -----------------------------------------------------------------------


def test_settings_defaults_match_the_spec() -> None:
    s = QueueSettings()

    assert (s.lease, s.max_attempts, s.aging, s.dedup_window) == (30.0, 5, None, 3600.0)
    assert (s.retry.base, s.retry.factor, s.retry.max) == (1.0, 2.0, 300.0)
    assert (s.max_message_size, s.max_in_flight, s.on_dead) == (1024 * 1024, None, "continue")


def test_settings_accept_timedelta_and_store_seconds() -> None:
    s = QueueSettings.build(lease=timedelta(minutes=5), aging=timedelta(seconds=90),
                            dedup_window=timedelta(hours=1),
                            retry={"base": timedelta(seconds=2), "max": timedelta(minutes=1)})

    assert (s.lease, s.aging, s.dedup_window) == (300.0, 90.0, 3600.0)
    assert (s.retry.base, s.retry.max) == (2.0, 60.0)


def test_settings_build_changes_only_what_is_given() -> None:
    base = QueueSettings.build(lease=60, max_attempts=9, on_dead="park")

    changed = QueueSettings.build(base, lease=120)

    assert (changed.lease, changed.max_attempts, changed.on_dead) == (120.0, 9, "park")
    assert base.lease == 60.0


def test_settings_round_trip_through_json() -> None:
    s = QueueSettings.build(lease=12.5, aging=3, max_in_flight=40, on_dead="park",
                            retry={"base": 0.5, "factor": 3, "max": 90, "jitter": 0.2})

    again = QueueSettings.from_json(s.to_json())

    assert again == s
    assert json.loads(s.to_json())["retry"]["factor"] == 3.0


def test_settings_are_frozen() -> None:
    s = QueueSettings()

    with pytest.raises(dataclasses.FrozenInstanceError):
        s.lease = 5  # type: ignore[misc]


@pytest.mark.parametrize(("changes", "named"), [
    ({"leese": 5}, "leese"), ({"lease": 0}, "lease"), ({"lease": -3}, "lease"),
    ({"lease": math.nan}, "lease"), ({"lease": "30"}, "lease"), ({"lease": 13 * 3600}, "lease"),
    ({"max_attempts": 0}, "max_attempts"), ({"max_attempts": 1001}, "max_attempts"),
    ({"max_attempts": True}, "max_attempts"), ({"max_attempts": 2.0}, "max_attempts"),
    ({"aging": 0}, "aging"), ({"aging": -1}, "aging"), ({"dedup_window": -1}, "dedup_window"),
    ({"max_message_size": 0}, "max_message_size"),
    ({"max_message_size": 65 * 1024 * 1024}, "max_message_size"),
    ({"max_in_flight": 0}, "max_in_flight"), ({"max_in_flight": True}, "max_in_flight"),
    ({"on_dead": "drop"}, "on_dead"), ({"retry": 5}, "retry"),
    ({"retry": {"bogus": 1}}, "bogus"), ({"retry": {"factor": 0.5}}, "factor"),
    ({"retry": {"jitter": 1.5}}, "jitter"), ({"retry": {"base": -1}}, "base"),
    ({"retry": {"base": 60, "max": 30}}, "retry base"), ({"retry": {"max": 0.5}}, "retry max"),
], ids=repr)
def test_settings_reject_bad_values_naming_the_setting(changes: dict[str, object],
                                                       named: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        QueueSettings.build(**changes)  # type: ignore[arg-type]

    assert named in str(caught.value)


def test_duration_errors_read_as_seconds_and_days_not_exponents() -> None:
    with pytest.raises(InvalidArgument) as caught:
        QueueSettings.build(aging=timedelta(days=365))

    assert str(caught.value) == (
        "aging must be at most 2592000 seconds (30 days), got 31536000 seconds (365 days)")


def test_settings_reject_bad_values_on_update_too() -> None:
    base = QueueSettings.build(lease=60)

    with pytest.raises(InvalidArgument):
        QueueSettings.build(base, max_attempts=-1)
    assert base.max_attempts == 5


def test_settings_accept_the_edges_of_each_range() -> None:
    low = QueueSettings.build(max_attempts=1, max_in_flight=1, max_message_size=1,
                              dedup_window=0, lease=0.001)
    high = QueueSettings.build(max_attempts=1000, max_message_size=64 * 1024 * 1024,
                               lease=12 * 3600)

    assert (low.max_attempts, low.max_in_flight, low.dedup_window) == (1, 1, 0.0)
    assert (high.max_attempts, high.lease) == (1000, 43200.0)
