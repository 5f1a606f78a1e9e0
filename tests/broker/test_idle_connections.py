"""connections.max.idle.ms on trio's MockClock: a connection over in-memory streams is
closed once nothing has been received, sent or in hand for that long, and not before."""

from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from tributary.broker import connection
from tributary.broker.connection import serve_connection
from tributary.broker.context import RequestContext
from tributary.broker.idle import SLACK, IdleTimer

from .memory_connection import EchoHandler, answer, closed, connected, fake_broker, receive_frames, request_frame

IDLE_MS = 1000


# --- the timer ----------------------------------------------------------------------------------


def _idle_since(last_activity: float) -> bool:
    """Whether now is when a connection last active at ``last_activity`` may be closed:
    no sooner than the timeout, and at most the slack later."""
    now, timeout = trio.current_time(), IDLE_MS / 1000
    return last_activity + timeout <= now <= last_activity + timeout * (1 + SLACK) + 1e-9


async def test_timer_moves_its_scope_deadline(autojump_clock: trio.testing.MockClock) -> None:
    with trio.CancelScope() as scope:
        timer = IdleTimer(scope, IDLE_MS)
        assert scope.deadline == pytest.approx(1.125)  # the timeout, and the slack
        await trio.sleep(0.1)
        timer.activity()  # still due more than the timeout away: not moved (cheap)
        assert scope.deadline == pytest.approx(1.125)
        await trio.sleep(0.3)
        timer.activity()  # now due sooner than the timeout: pushed a timeout and a slack on
        assert scope.deadline == pytest.approx(1.525)
        timer.begin()
        timer.begin()
        assert scope.deadline == math.inf
        timer.activity()  # activity while a request is in hand does not bring the deadline back
        assert scope.deadline == math.inf
        timer.end()
        assert scope.deadline == math.inf
        await trio.sleep(10)
        timer.end()
        assert scope.deadline == pytest.approx(11.525)
        await trio.sleep_forever()
    assert timer.expired
    assert trio.current_time() == pytest.approx(11.525)


async def test_disabled_timer_never_fires(autojump_clock: trio.testing.MockClock) -> None:
    with trio.CancelScope() as scope:
        timer = IdleTimer(scope, None)
        timer.begin()
        timer.end()
        timer.activity()
        assert scope.deadline == math.inf
    assert not timer.expired


# --- a connection -------------------------------------------------------------------------------


async def test_silent_connection_is_closed_after_the_timeout(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    EchoHandler(monkeypatch)
    broker = fake_broker(connections_max_idle_ms=IDLE_MS)
    async with connected(broker) as client:
        await closed(client)
        assert _idle_since(0.0)
    assert broker.metrics.connections_closed_idle == 1


async def test_each_request_restarts_the_idle_clock(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    EchoHandler(monkeypatch)
    broker = fake_broker(connections_max_idle_ms=IDLE_MS)
    async with connected(broker) as client:
        for i in range(5):  # a request every 0.9 s: never a second of silence
            await trio.sleep(0.9)
            await client.send_all(request_frame(i))
            assert [cid for cid, _ in map(answer, await receive_frames(client, 1))] == [i]
        await closed(client)
        assert _idle_since(4.5)
    assert broker.metrics.connections_closed_idle == 1


async def test_request_in_hand_keeps_the_connection_open(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long-polling Fetch or a JoinGroup waiting for its group may take longer than the
    timeout: the client is waiting for the broker, not idle."""
    handler = EchoHandler(monkeypatch)
    handler.gate = trio.Event()
    broker = fake_broker(connections_max_idle_ms=IDLE_MS)
    async with connected(broker) as client:
        await client.send_all(request_frame(1))
        await trio.sleep(30)
        handler.gate.set()
        assert [cid for cid, _ in map(answer, await receive_frames(client, 1))] == [1]
        await closed(client)
        assert _idle_since(30.0)


async def test_waiting_for_the_request_budget_is_not_idle(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The budget is spent elsewhere: the connection is muted by the broker, so it is not
    closed for the silence that follows."""
    EchoHandler(monkeypatch)
    broker = fake_broker(connections_max_idle_ms=IDLE_MS, queued_max_request_bytes=4096)
    await broker.request_budget.acquire(4096)  # another connection's requests
    async with connected(broker) as client:
        await client.send_all(request_frame(1, 100))
        await trio.sleep(30)
        assert broker.request_budget.waiting == 1
        broker.request_budget.release(4096)
        assert [answer(r) for r in await receive_frames(client, 1)] == [(1, 100)]
        await closed(client)
        assert _idle_since(30.0)


async def test_half_sent_frame_then_silence_is_idle(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow-loris client: its frame's budget is taken, its body never comes. It is closed
    after the timeout, and the budget is whole again."""
    EchoHandler(monkeypatch)
    broker = fake_broker(connections_max_idle_ms=IDLE_MS, queued_max_request_bytes=64 * 1024)
    async with connected(broker) as client:
        await trio.sleep(0.5)
        await client.send_all(request_frame(1, 50_000)[:1000])
        await trio.testing.wait_all_tasks_blocked()
        assert broker.request_budget.used == 50_000
        await closed(client)
        assert _idle_since(0.5)
    assert broker.request_budget.used == 0


async def test_client_that_stops_reading_responses_is_idle(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over a lockstep stream nothing is written until the client reads: a client that
    never does makes no progress, and its connection (and the budget its requests hold)
    is given up after the timeout, as Kafka's idle expiry would."""
    EchoHandler(monkeypatch)
    broker = fake_broker(connections_max_idle_ms=IDLE_MS)
    client, server = trio.testing.lockstep_stream_pair()
    with trio.fail_after(3600):  # a failure, not a hang
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_connection, broker, server, "test")
            await client.send_all(request_frame(1, 500))
            await trio.testing.wait_all_tasks_blocked()
            assert broker.request_budget.used == 500
    assert _idle_since(0.0)
    assert broker.metrics.connections_closed_idle == 1
    assert broker.request_budget.used == 0


async def test_no_timeout_means_open_for_ever(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    EchoHandler(monkeypatch)
    broker = fake_broker(connections_max_idle_ms=None)
    async with connected(broker, within=8 * 24 * 3600) as client:
        await trio.sleep(7 * 24 * 3600)
        await client.send_all(request_frame(3))
        assert [cid for cid, _ in map(answer, await receive_frames(client, 1))] == [3]
        await client.aclose()
    assert broker.metrics.connections_closed_idle == 0


@dataclass
class _Region:
    fd: int
    position: int
    size: int


@dataclass
class _Records:
    regions: list[_Region]

    def __len__(self) -> int:
        return sum(r.size for r in self.regions)


async def test_slow_reader_of_a_large_response_is_not_idle(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A 4 MiB fetch read at 1 MiB every 0.8 s takes longer than the timeout in all,
    but every chunk written is activity: the client gets all of it."""
    data = os.urandom(4 << 20)
    (tmp_path / "segment").write_bytes(data)
    fd = os.open(tmp_path / "segment", os.O_RDONLY)

    async def respond(ctx: RequestContext, request: bytes) -> list[Any]:
        # A response frame: length, correlation id 1, then the records from the file.
        return [struct.pack(">ii", 4 + len(data), 1), _Records([_Region(fd, 0, len(data))])]

    monkeypatch.setattr(connection, "respond", respond)
    broker = fake_broker(connections_max_idle_ms=IDLE_MS)
    client, server = trio.testing.lockstep_stream_pair()
    received = bytearray()
    try:
        with trio.fail_after(3600):  # a failure, not a hang
            async with trio.open_nursery() as nursery:
                nursery.start_soon(serve_connection, broker, server, "test")
                await client.send_all(request_frame(1))
                while len(received) < 8 + len(data):
                    chunk = await client.receive_some(1 << 20)
                    assert chunk, f"closed after {len(received)} bytes at {trio.current_time()} s"
                    received += chunk
                    await trio.sleep(0.8 * len(chunk) / (1 << 20))
                await closed(client)
    finally:
        os.close(fd)
    assert bytes(received[8:]) == data
    assert broker.metrics.connections_closed_idle == 1
