"""client/backoff.py: the reconnect and retry delays, doubling to a cap, for any failure count."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tributary.client.backoff import JITTER, doubled, jittered


def test_the_delay_doubles_up_to_the_maximum() -> None:
    assert [doubled(0.05, n, 0.4) for n in range(6)] == [0.05, 0.1, 0.2, 0.4, 0.4, 0.4]


def test_a_broker_away_for_hours_still_gets_the_maximum() -> None:
    # A failure a second for a day: 2 ** 86400 is no float (the old formula raised OverflowError
    # after about 1024 failures, killing a client's metadata task).
    assert doubled(0.1, 86_400, 1.0) == 1.0
    assert doubled(0.1, 1024, 1.0) == 1.0


@given(st.integers(min_value=0, max_value=10**9), st.floats(1e-3, 10.0), st.floats(1e-3, 100.0))
def test_the_delay_never_exceeds_the_maximum_nor_shrinks(doublings: int, initial: float, maximum: float) -> None:
    delay = doubled(initial, doublings, maximum)
    assert delay <= maximum
    assert delay >= min(initial, maximum)
    assert doubled(initial, doublings + 1, maximum) >= delay


@given(st.floats(1e-3, 100.0), st.floats(0.0, 1.0, exclude_max=True))
def test_jitter_stays_within_a_fifth_either_way(delay: float, draw: float) -> None:
    assert delay * (1 - JITTER) <= jittered(delay, draw) <= delay * (1 + JITTER)


def test_jitter_spans_its_range() -> None:
    assert jittered(1.0, 0.0) == 1 - JITTER
    assert jittered(1.0, 0.5) == 1.0
