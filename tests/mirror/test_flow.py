"""mirror.flow: the bandwidth cap (TokenBucket sans-IO, Throttle on trio's clock) and the
bound on bytes in flight (ByteBudget). Time is explicit or trio's MockClock (autojump),
so the rates below are exact, not hoped for."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.mirror.config import MirrorConfig
from tributary.mirror.fetcher import SourceFetcher
from tributary.mirror.flow import ByteBudget, Throttle, TokenBucket

# --- TokenBucket, sans-IO -------------------------------------------------------------------------


def test_burst_is_available_at_once_then_the_rate_applies() -> None:
    bucket = TokenBucket(rate=1000, burst=500, now=0.0)
    assert bucket.take(500, 0.0) == 0.0
    assert bucket.take(100, 0.0) == pytest.approx(0.1)
    # After waiting the 0.1 s, the debt is paid; the next 100 cost another 0.1 s.
    assert bucket.take(100, 0.1) == pytest.approx(0.1)


def test_idle_time_refills_up_to_the_burst_only() -> None:
    bucket = TokenBucket(rate=1000, burst=500, now=0.0)
    assert bucket.take(500, 0.0) == 0.0
    # An hour idle refills 500 tokens, not 3.6 million.
    assert bucket.take(500, 3600.0) == 0.0
    assert bucket.take(1, 3600.0) == pytest.approx(0.001)


def test_a_take_larger_than_the_burst_runs_into_debt() -> None:
    """A large fetch is never refused, only followed by a proportionate pause."""
    bucket = TokenBucket(rate=1000, burst=100, now=0.0)
    assert bucket.take(2100, 0.0) == pytest.approx(2.0)
    assert bucket.take(1, 1.0) == pytest.approx(1.001), "still paying the debt"


def test_rate_and_burst_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        TokenBucket(rate=0, burst=10, now=0.0)
    with pytest.raises(ValueError, match="positive"):
        TokenBucket(rate=10, burst=-1, now=0.0)


@settings(max_examples=200)
@given(
    rate=st.integers(1_000, 10_000_000),
    burst=st.integers(1_000, 1_000_000),
    steps=st.lists(st.tuples(st.integers(1, 3_000_000), st.floats(0, 2)), min_size=1, max_size=50),
)
def test_average_rate_is_respected(rate: int, burst: int, steps: list[tuple[int, float]]) -> None:
    """Whatever the sizes and idle gaps: once each delay is waited, the bytes taken never exceed
    burst + rate * elapsed; and a taker that never idles is held to exactly that, no slower."""
    bucket = TokenBucket(rate, burst, now=0.0)
    now = 0.0
    taken = 0
    for amount, idle in steps:
        now += idle
        now += bucket.take(amount, now)
        taken += amount
        assert taken <= burst + rate * now + 1e-6 * taken
    greedy = TokenBucket(rate, burst, now=0.0)
    now = 0.0
    taken = 0
    for amount, _ in steps:
        now += greedy.take(amount, now)
        taken += amount
    assert now == pytest.approx(max(0.0, (taken - burst) / rate), rel=1e-9, abs=1e-9)


# --- Throttle on trio's clock -----------------------------------------------------------------------


async def test_throttle_holds_the_average_rate(autojump_clock: trio.testing.MockClock) -> None:
    rate = 1_000_000
    throttle = Throttle(rate)  # burst: max(rate / 10, 64 KiB) = 100 000 bytes
    start = trio.current_time()
    chunk = 50_000
    for _ in range(100):  # 5 MB
        await throttle.consumed(chunk)
    elapsed = trio.current_time() - start
    assert elapsed == pytest.approx((100 * chunk - 100_000) / rate, rel=1e-6)


async def test_throttle_lets_a_burst_through_at_once(autojump_clock: trio.testing.MockClock) -> None:
    throttle = Throttle(1_000_000)
    start = trio.current_time()
    await throttle.consumed(60_000)
    await throttle.consumed(40_000)
    assert trio.current_time() == start, "the first 100 000 bytes (the burst) pass without waiting"
    await throttle.consumed(1)
    assert trio.current_time() - start == pytest.approx(1e-6)


async def test_throttle_refills_while_idle(autojump_clock: trio.testing.MockClock) -> None:
    throttle = Throttle(1_000_000)
    await throttle.consumed(100_000)
    await trio.sleep(10)
    start = trio.current_time()
    await throttle.consumed(100_000)
    assert trio.current_time() == start


async def test_no_rate_means_no_throttle(autojump_clock: trio.testing.MockClock) -> None:
    throttle = Throttle(None)
    start = trio.current_time()
    for _ in range(100):
        await throttle.consumed(10**9)
    assert trio.current_time() == start


# --- ByteBudget -------------------------------------------------------------------------------------


async def test_budget_blocks_until_released() -> None:
    budget = ByteBudget(1000)
    await budget.acquire(600)
    await budget.acquire(400)
    assert budget.used == 1000
    acquired = trio.Event()

    async def wants_more() -> None:
        await budget.acquire(300)
        acquired.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wants_more)
        await trio.testing.wait_all_tasks_blocked()
        assert not acquired.is_set(), "the budget is spent"
        budget.release(200)
        await trio.testing.wait_all_tasks_blocked()
        assert not acquired.is_set(), "800 + 300 still exceeds 1000"
        budget.release(100)
        await trio.testing.wait_all_tasks_blocked()
        assert acquired.is_set()
    assert budget.used == 1000


async def test_oversized_reservation_passes_alone_and_blocks_others() -> None:
    """A batch bigger than the whole budget still moves, but only when nothing else is reserved."""
    budget = ByteBudget(1000)
    await budget.acquire(100)
    order: list[str] = []

    async def big() -> None:
        await budget.acquire(5000)
        order.append("big")

    async def small() -> None:
        await budget.acquire(10)
        order.append("small")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(big)
        await trio.testing.wait_all_tasks_blocked()
        assert order == []
        budget.release(100)
        await trio.testing.wait_all_tasks_blocked()
        assert order == ["big"]
        assert budget.used == 5000
        nursery.start_soon(small)
        await trio.testing.wait_all_tasks_blocked()
        assert order == ["big"], "nothing else fits beside the oversized reservation"
        budget.release(5000)
        await trio.testing.wait_all_tasks_blocked()
        assert order == ["big", "small"]
    assert budget.used == 10


async def test_many_waiters_all_get_through_as_bytes_come_back() -> None:
    budget = ByteBudget(100)
    done: list[int] = []

    async def worker(i: int) -> None:
        await budget.acquire(60)
        assert budget.used <= 100
        done.append(i)
        await trio.sleep(0.01)
        budget.release(60)

    async with trio.open_nursery() as nursery:
        for i in range(10):
            nursery.start_soon(worker, i)
    assert sorted(done) == list(range(10))
    assert budget.used == 0


def test_releasing_more_than_acquired_is_a_bug() -> None:
    budget = ByteBudget(100)
    budget.release(0)  # nothing: allowed
    with pytest.raises(AssertionError):
        budget.release(1)


# --- fetch sizing under a bandwidth cap ----------------------------------------------------------


@pytest.mark.parametrize(
    ("rate", "expected"),
    [
        (None, 16 * 1024 * 1024),  # no cap: the configured fetch size
        (1_000_000, 3_750_000),  # 1 MB/s, 30 s timeout, 2 sessions: a quarter of the timeout each
        (10_000, 2 * 1024 * 1024),  # never below one partition's fetch (a batch must fit)
        (10**9, 16 * 1024 * 1024),  # never above the configured size
    ],
)
def test_fetch_size_follows_the_bandwidth_cap(rate: int | None, expected: int) -> None:
    config = MirrorConfig(
        source="s:1", source_alias="east", target="t:1", bandwidth_bytes_per_second=rate, fetch_sessions=2
    )
    fetcher = SourceFetcher(SimpleNamespace(config=config), list)  # type: ignore[arg-type]
    assert fetcher._request_bytes() == expected
