"""serve_connection over trio's in-memory streams, for tests on the MockClock.

The broker is a stand-in with just what a connection touches (config, metrics,
the request budget), and the dispatcher is replaced by :class:`EchoHandler`, which
answers each request with its correlation id and size once its gate (if any) opens,
so tests can hold requests "in hand" and count what was read.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import trio
import trio.testing

from tributary.broker import connection
from tributary.broker.config import BrokerConfig, HostPort
from tributary.broker.context import RequestContext
from tributary.broker.metrics import BrokerMetrics
from tributary.broker.request_budget import RequestBudget
from tributary.protocol.framing import FrameDecoder, frame
from tributary.protocol.headers import encode_request
from tributary.protocol.messages import ApiVersionsRequest

ADDRESS = HostPort("127.0.0.1", 9092)


def fake_broker(**settings: Any) -> Any:
    """A stand-in Broker: ``settings`` are BrokerConfig fields (``connections_max_idle_ms=1000``)."""
    config = dataclasses.replace(
        BrokerConfig(broker_id=1, listen=ADDRESS, data_dir=Path("/nonexistent"), zookeeper="zk", advertise=ADDRESS),
        **settings,
    )
    return SimpleNamespace(
        config=config, metrics=BrokerMetrics(), request_budget=RequestBudget(config.queued_max_request_bytes)
    )


def request_frame(correlation_id: int, size: int = 0) -> bytes:
    """A framed request with a real v0 ApiVersions header, padded to a ``size``-byte payload."""
    payload = encode_request(ApiVersionsRequest(), 0, correlation_id, "t")[4:]
    return frame(payload + b"\0" * max(size - len(payload), 0))


class EchoHandler:
    """Replaces dispatch.respond: answers (correlation id, request size), in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.gate: trio.Event | None = None
        self.entered: list[int] = []  # correlation ids, as handling starts (before the gate)
        self.handled: list[int] = []
        monkeypatch.setattr(connection, "respond", self.respond)

    async def respond(self, ctx: RequestContext, request: bytes) -> list[Any]:
        self.entered.append(ctx.envelope.correlation_id)
        if self.gate is not None:
            await self.gate.wait()
        self.handled.append(ctx.envelope.correlation_id)
        return [frame(struct.pack(">ii", ctx.envelope.correlation_id, len(request)))]


def answer(payload: bytes) -> tuple[int, int]:
    """(correlation id, request size) of an EchoHandler response."""
    cid, size = struct.unpack(">ii", payload)
    return cid, size


class CountingStream(trio.abc.Stream):
    """The server's end of a stream pair, counting the bytes it has received."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.received = 0

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        data = await self.inner.receive_some(max_bytes)
        self.received += len(data)
        return bytes(data)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def receive_frames(stream: trio.abc.ReceiveStream, count: int) -> list[bytes]:
    decoder = FrameDecoder()
    out: list[bytes] = []
    while len(out) < count:
        data = await stream.receive_some()
        if not data:
            raise EOFError(f"closed after {len(out)} of {count} responses")
        decoder.feed(data)
        out.extend(decoder.frames())
    return out


async def closed(stream: trio.abc.ReceiveStream, within: float = 3600) -> None:
    """Until the server closes the stream (reading, and dropping, whatever comes first);
    a failure after ``within`` seconds (virtual ones, on the MockClock) rather than a hang."""
    with trio.fail_after(within):
        while await stream.receive_some():
            pass


@asynccontextmanager
async def connected(
    broker: Any, *, within: float = 3600, peer: str = "test"
) -> AsyncIterator[trio.testing.StapledStream[trio.testing.MemorySendStream, trio.testing.MemoryReceiveStream]]:
    """A client stream to ``serve_connection`` for ``broker`` over memory streams; the block
    ends once the connection has, and fails (rather than hangs) after ``within`` seconds."""
    client, server = trio.testing.memory_stream_pair()
    with trio.fail_after(within):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(connection.serve_connection, broker, server, peer)
            yield client
