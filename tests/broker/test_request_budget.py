"""queued.max.request.bytes: the budget primitive on trio's MockClock, and a connection
over in-memory streams reading no further than the budget and its queue allow."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from tributary.broker.connection import MAX_QUEUED_REQUESTS, READ_AHEAD, serve_connection
from tributary.broker.request_budget import BudgetLease, RequestBudget

from .memory_connection import (
    CountingStream,
    EchoHandler,
    answer,
    closed,
    connected,
    fake_broker,
    receive_frames,
    request_frame,
)

KIB = 1024

# --- the primitive ----------------------------------------------------------------------------


async def test_acquire_within_capacity_is_immediate_and_counted() -> None:
    budget = RequestBudget(100)
    await budget.acquire(60)
    await budget.acquire(40)
    assert (budget.used, budget.waiting) == (100, 0)
    budget.release(100)
    assert budget.used == 0


async def test_acquire_waits_until_enough_is_released(autojump_clock: trio.testing.MockClock) -> None:
    budget = RequestBudget(100)
    await budget.acquire(80)
    granted_at: list[float] = []

    async def wants_50() -> None:
        await budget.acquire(50)
        granted_at.append(trio.current_time())

    with trio.fail_after(60):  # a failure, not a hang
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wants_50)
            await trio.sleep(5)
            assert (budget.used, budget.waiting, granted_at) == (80, 1, [])
            budget.release(20)  # 60 in use: 50 more does not fit yet
            await trio.sleep(5)
            assert granted_at == []
            budget.release(30)
    assert granted_at == [10.0]
    assert budget.used == 80


async def test_waiters_are_served_first_come_first_served(autojump_clock: trio.testing.MockClock) -> None:
    """A large frame at the head is not overtaken by smaller ones that would fit:
    otherwise a stream of small requests could starve it for ever."""
    budget = RequestBudget(100)
    await budget.acquire(100)
    order: list[str] = []

    async def take(name: str, size: int) -> None:
        await budget.acquire(size)
        order.append(name)

    with trio.fail_after(60):  # a failure, not a hang
        async with trio.open_nursery() as nursery:
            nursery.start_soon(take, "large", 90)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(take, "small", 10)
            await trio.testing.wait_all_tasks_blocked()
            budget.release(20)  # 20 free: "small" would fit, but "large" is first
            await trio.testing.wait_all_tasks_blocked()
            assert (order, budget.used, budget.waiting) == ([], 80, 2)
            budget.release(70)  # "large" fits now, and then "small" no longer does
            await trio.testing.wait_all_tasks_blocked()
            assert (order, budget.used, budget.waiting) == (["large"], 100, 1)
            budget.release(10)
    assert order == ["large", "small"]
    assert budget.used == 100


async def test_a_cancelled_waiter_takes_nothing_and_lets_the_next_one_in(
    autojump_clock: trio.testing.MockClock,
) -> None:
    budget = RequestBudget(100)
    await budget.acquire(50)
    got_small = trio.Event()

    async def small() -> None:
        await budget.acquire(40)
        got_small.set()

    with trio.fail_after(60):  # a failure, not a hang
        async with trio.open_nursery() as nursery:
            with trio.move_on_after(1):
                nursery.start_soon(small)
                await budget.acquire(60)  # the head, blocking "small", until cancelled
            await got_small.wait()
    assert budget.used == 90
    assert budget.waiting == 0


async def test_acquire_granted_at_once_is_no_checkpoint_and_a_cancelled_wait_takes_nothing() -> None:
    budget = RequestBudget(100)
    with trio.CancelScope() as scope:
        scope.cancel()
        await budget.acquire(10)  # room: taken without a trip through the scheduler
        assert budget.used == 10
        await budget.acquire(95)  # must wait: the cancellation is delivered here
    assert scope.cancelled_caught
    assert (budget.used, budget.waiting) == (10, 0)


def test_more_than_the_whole_budget_never_fits() -> None:
    budget = RequestBudget(100)
    assert budget.fits(100)
    assert not budget.fits(101)
    with pytest.raises(ValueError, match="exceed the whole budget"):
        trio.run(budget.acquire, 101)
    with pytest.raises(ValueError, match="releasing 1 bytes"):
        budget.release(1)


async def test_unlimited_budget_counts_but_never_waits() -> None:
    budget = RequestBudget(None)
    await budget.acquire(10**12)
    assert budget.fits(10**15)
    assert budget.used == 10**12


async def test_a_lease_holding_its_share_waits_for_its_own_releases(autojump_clock: trio.testing.MockClock) -> None:
    budget = RequestBudget(400)  # a share of 100
    lease, other = BudgetLease(budget), BudgetLease(budget)
    await lease.acquire(60)
    took: list[float] = []

    async def more() -> None:
        await lease.acquire(50)  # 110 would pass the share; the budget has room, but not for this
        took.append(trio.current_time())

    with trio.fail_after(60):  # a failure, not a hang
        async with trio.open_nursery() as nursery:
            nursery.start_soon(more)
            await trio.sleep(1)
            await other.acquire(100)  # other connections are not held up by it
            assert (took, budget.held_back, budget.throttled) == ([], 1, 1)
            other.release(100)  # another connection's release does not let it in
            await trio.sleep(1)
            assert took == []
            lease.release(60)
    assert took == [2.0]
    assert (lease.held, budget.used, budget.held_back) == (50, 50, 0)


async def test_a_lease_gives_back_everything_it_still_holds_once() -> None:
    budget = RequestBudget(1000)  # a share of 250
    lease = BudgetLease(budget)
    await lease.acquire(30)
    await lease.acquire(20)
    lease.release(30)
    assert (lease.held, budget.used) == (20, 20)
    lease.release_all()
    assert (lease.held, budget.used) == (0, 0)
    lease.release(20)  # a response written after the connection gave everything back
    assert budget.used == 0


# --- a connection reading within the budget ---------------------------------------------------


async def test_a_connection_reads_ahead_no_more_than_its_share(monkeypatch: pytest.MonkeyPatch) -> None:
    """64 KiB of budget, so a 16 KiB share; 3 KiB frames: five are read (15 KiB), the rest
    wait in the stream, unread, until this connection's responses free its share; every
    request is answered, in order."""
    handler = EchoHandler(monkeypatch)
    handler.gate = trio.Event()
    broker = fake_broker(queued_max_request_bytes=64 * KIB)
    client, server_end = trio.testing.memory_stream_pair()
    server = CountingStream(server_end)
    frames = [request_frame(i, 3 * KIB) for i in range(100)]  # 300 KiB, well past READ_AHEAD
    with trio.fail_after(60):  # a failure, not a hang
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_connection, broker, server, "test")
            await client.send_all(b"".join(frames))
            await trio.testing.wait_all_tasks_blocked()
            # The sixth frame's 3 KiB would pass the share: its body is not read.
            assert broker.request_budget.used == 15 * KIB
            assert (broker.request_budget.waiting, broker.request_budget.held_back) == (0, 1)
            assert server.received <= 5 * len(frames[0]) + READ_AHEAD
            assert server.received < sum(map(len, frames))
            handler.gate.set()
            responses = [answer(r) for r in await receive_frames(client, len(frames))]
            assert responses == [(i, 3 * KIB) for i in range(len(frames))]
            assert server.received == sum(map(len, frames))
            await client.aclose()
    assert broker.request_budget.used == 0
    assert broker.request_budget.throttled == 0


async def test_a_connection_holding_nothing_may_take_a_frame_as_large_as_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    EchoHandler(monkeypatch)
    broker = fake_broker(queued_max_request_bytes=64 * KIB)
    async with connected(broker, within=60) as client:
        await client.send_all(request_frame(1, 64 * KIB) + request_frame(2, 64 * KIB))
        assert [answer(r) for r in await receive_frames(client, 2)] == [(1, 64 * KIB), (2, 64 * KIB)]
        await client.aclose()


async def test_connections_wait_in_turn_once_the_budget_is_spent(monkeypatch: pytest.MonkeyPatch) -> None:
    """16 KiB of budget, 6 KiB frames, four connections: two are read, two wait (their
    bytes unread) until the first two are answered."""
    handler = EchoHandler(monkeypatch)
    handler.gate = trio.Event()
    broker = fake_broker(queued_max_request_bytes=16 * KIB)
    pairs = [trio.testing.memory_stream_pair() for _ in range(4)]
    with trio.fail_after(60):  # a failure, not a hang
        async with trio.open_nursery() as nursery:
            for i, (client, server) in enumerate(pairs):
                nursery.start_soon(serve_connection, broker, server, f"client-{i}")
                await client.send_all(request_frame(i, 6 * KIB))
                await trio.testing.wait_all_tasks_blocked()
            assert broker.request_budget.used == 12 * KIB
            assert broker.request_budget.waiting == 2
            assert handler.entered == [0, 1]  # first come, first served
            handler.gate.set()
            for i, (client, _) in enumerate(pairs):
                assert [answer(r) for r in await receive_frames(client, 1)] == [(i, 6 * KIB)]
                await client.aclose()
    assert broker.request_budget.used == 0


async def test_read_ahead_stops_at_the_request_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unlimited budget: the reader still stops once MAX_QUEUED_REQUESTS wait for the
    handler, one frame ahead of them at most (plus READ_AHEAD bytes)."""
    handler = EchoHandler(monkeypatch)
    handler.gate = trio.Event()
    broker = fake_broker(queued_max_request_bytes=None)
    client, server_end = trio.testing.memory_stream_pair()
    server = CountingStream(server_end)
    size = 100 * KIB
    frames = [request_frame(i, size) for i in range(60)]
    with trio.fail_after(60):  # a failure, not a hang
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_connection, broker, server, "test")
            await client.send_all(b"".join(frames))
            await trio.testing.wait_all_tasks_blocked()
            # One in the handler, MAX_QUEUED_REQUESTS queued, one waiting to be queued.
            in_reach = MAX_QUEUED_REQUESTS + 2
            assert broker.request_budget.used == in_reach * size
            assert server.received <= in_reach * len(frames[0]) + READ_AHEAD
            handler.gate.set()
            responses = [answer(r) for r in await receive_frames(client, len(frames))]
            assert [cid for cid, _ in responses] == list(range(len(frames)))
            await client.aclose()
    assert broker.request_budget.used == 0


async def test_bytes_stay_counted_until_the_response_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over a lockstep stream a response is written only as the client reads it: until
    then the request's bytes are still in the budget."""
    EchoHandler(monkeypatch)
    broker = fake_broker(queued_max_request_bytes=64 * KIB)
    client, server = trio.testing.lockstep_stream_pair()
    with trio.fail_after(60):  # a failure, not a hang
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_connection, broker, server, "test")
            await client.send_all(request_frame(7, 10 * KIB))
            await trio.testing.wait_all_tasks_blocked()
            assert broker.request_budget.used == 10 * KIB  # handled, but the response is not out
            assert [answer(r) for r in await receive_frames(client, 1)] == [(7, 10 * KIB)]
            await trio.testing.wait_all_tasks_blocked()
            assert broker.request_budget.used == 0
            await client.aclose()


async def test_frame_larger_than_the_budget_closes_only_its_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    EchoHandler(monkeypatch)
    broker = fake_broker(queued_max_request_bytes=8 * KIB)
    attacker, attacker_server = trio.testing.memory_stream_pair()
    other, other_server = trio.testing.memory_stream_pair()
    with trio.fail_after(60):  # a failure, not a hang
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_connection, broker, attacker_server, "attacker")
            nursery.start_soon(serve_connection, broker, other_server, "other")
            # Only the length prefix: refused before any of the body is read.
            await attacker.send_all(request_frame(1, 8 * KIB + 1)[:4])
            await closed(attacker)
            await other.send_all(request_frame(2, 8 * KIB))
            assert [answer(r) for r in await receive_frames(other, 1)] == [(2, 8 * KIB)]
            await other.aclose()
    assert broker.request_budget.used == 0


async def test_a_dying_connection_gives_back_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests queued and in hand, a frame half read: the client goes away, the bytes come back."""
    handler = EchoHandler(monkeypatch)
    handler.gate = trio.Event()
    broker = fake_broker(queued_max_request_bytes=None)
    client, server = trio.testing.memory_stream_pair()
    with trio.fail_after(60):  # a failure, not a hang
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_connection, broker, server, "test")
            await client.send_all(b"".join(request_frame(i, KIB) for i in range(5)) + request_frame(5, KIB)[:100])
            await trio.testing.wait_all_tasks_blocked()
            assert broker.request_budget.used == 6 * KIB
            await client.aclose()
            # The handler is still busy with the first; the connection ends once it is cancelled.
            nursery.cancel_scope.cancel()
    assert broker.request_budget.used == 0
