"""One client connection: read frames, handle requests in order, send responses.

Clients pipeline requests (librdkafka keeps several in flight per broker). A
reader task decodes frames as they arrive and queues them; one handler task
takes them in order and sends each response before the next request starts,
as Kafka's broker does: responses leave in request order, and two produce
requests to one partition are appended in the order they were sent.

A malformed frame, an unknown API or an unsupported version (other than
ApiVersions, which gets a v0 error body so the client can downgrade) closes
this connection only; every other connection keeps being served.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sized
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from tributary.broker.context import CloseConnection, RequestContext
from tributary.broker.dispatch import respond
from tributary.broker.transport import send_parts
from tributary.protocol.errors import ProtocolError
from tributary.protocol.framing import FrameDecoder
from tributary.protocol.headers import decode_request_header

if TYPE_CHECKING:
    from tributary.broker.state import Broker

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Response:
    """An encoded response and what to release once it is on the wire."""

    parts: list[bytes | Sized]
    after_send: list[Callable[[], None]]


# Requests read ahead of the one being handled: bounds memory per connection
# while letting clients pipeline (librdkafka's default is 5 in flight).
MAX_QUEUED_REQUESTS = 16
# Responses handled but not yet written: the handler runs ahead of a slow reader
# by at most this many.
MAX_QUEUED_RESPONSES = 16
RECEIVE_CHUNK = 256 * 1024


async def serve_connection(broker: Broker, stream: trio.abc.Stream, peer: str) -> None:
    send_requests, receive_requests = trio.open_memory_channel[bytes](MAX_QUEUED_REQUESTS)
    send_responses, receive_responses = trio.open_memory_channel[Response](MAX_QUEUED_RESPONSES)
    # The nursery wraps what its tasks raise in an ExceptionGroup (trio's strict
    # exception groups), so the expected endings are caught with except*; anything
    # else propagates and is logged as a bug.
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_read_frames, broker, stream, send_requests, peer)
            nursery.start_soon(_write_responses, stream, receive_responses, broker.config.sendfile)
            await _handle_requests(broker, receive_requests, send_responses, peer)
    except* (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError) as group:
        log.debug("connection %s lost: %s", peer, group.exceptions[0])
    except* CloseConnection as group:
        log.info("closing connection %s: %s", peer, group.exceptions[0])
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()


async def _read_frames(
    broker: Broker, stream: trio.abc.ReceiveStream, send: trio.MemorySendChannel[bytes], peer: str
) -> None:
    decoder = FrameDecoder(broker.config.socket_request_max_bytes)
    async with send:
        while True:
            data = await stream.receive_some(RECEIVE_CHUNK)
            if not data:
                if decoder.buffered:
                    log.info("connection %s closed mid-frame (%d bytes buffered)", peer, decoder.buffered)
                return
            decoder.feed(data)
            try:
                for frame in decoder.frames():
                    await send.send(frame)
            except ProtocolError as exc:
                raise CloseConnection(str(exc)) from None


async def _handle_requests(
    broker: Broker,
    receive: trio.MemoryReceiveChannel[bytes],
    responses: trio.MemorySendChannel[Response],
    peer: str,
) -> None:
    async with receive, responses:
        async for frame in receive:
            try:
                envelope = decode_request_header(frame)
            except ProtocolError as exc:
                raise CloseConnection(f"malformed request header: {exc}") from None
            ctx = RequestContext(broker, envelope, peer)
            started = time.perf_counter()
            try:
                parts = await respond(ctx, frame)
            except BaseException:
                _release(ctx.after_send)
                raise
            broker.metrics.request_handled(envelope.api_key, envelope.api_version, time.perf_counter() - started)
            if parts is None:
                _release(ctx.after_send)
            else:
                await responses.send(Response(parts, ctx.after_send))


async def _write_responses(
    stream: trio.abc.SendStream, receive: trio.MemoryReceiveChannel[Response], sendfile: bool
) -> None:
    """Send responses in order. Whatever is queued when the writer comes round
    goes out in one write: a client pipelining small produce requests gets its
    acknowledgements in a few segments instead of one syscall each."""
    async with receive:
        try:
            async for first in receive:
                batch = [first]
                while len(batch) < MAX_QUEUED_RESPONSES:
                    try:
                        batch.append(receive.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                try:
                    await send_parts(stream, [p for r in batch for p in r.parts], sendfile=sendfile)
                finally:
                    for response in batch:
                        _release(response.after_send)
        finally:
            # Responses never sent (the connection died) still hold segment pins.
            while True:
                try:
                    _release(receive.receive_nowait().after_send)
                except (trio.WouldBlock, trio.EndOfChannel):
                    break


def _release(callbacks: list[Callable[[], None]]) -> None:
    for release in callbacks:
        release()
