"""One client connection: read frames, handle requests in order, send responses.

Clients pipeline requests (librdkafka keeps several in flight per broker). A
reader task decodes frames as they arrive and queues them; one handler task
takes them in order and sends each response before the next request starts,
as Kafka's broker does: responses leave in request order, and two produce
requests to one partition are appended in the order they were sent.

A malformed frame, an unknown API or an unsupported version (other than
ApiVersions, which gets a v0 error body so the client can downgrade) closes
this connection only; every other connection keeps being served.

Memory is bounded twice over. Per connection, the reader reads a frame's body
only once the frame has its bytes from the broker-wide request budget
(``queued.max.request.bytes``, :mod:`broker.request_budget`) and never reads
more than ``READ_AHEAD`` bytes past the frame it is reading, so what it holds
unbudgeted is that much at most; it stops reading altogether while
``MAX_QUEUED_REQUESTS`` requests wait for the handler. Broker-wide, a frame's
bytes stay counted from its length prefix until its response has been written.
A connection idle for ``connections.max.idle.ms`` is closed (:mod:`broker.idle`).

On a SASL listener nothing but ApiVersions, SaslHandshake and SaslAuthenticate is served
until the exchange completes (:mod:`broker.security.sasl`); any other request closes the
connection, and so does a frame larger than Kafka's ``sasl.server.max.receive.size`` (512 KiB)
before then, so that an unauthenticated client cannot make the broker buffer much. After a v0
SaslHandshake the tokens arrive as raw frames and are answered as raw frames. A failed
authentication marks the connection; its last response is written, then it closes.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Sized
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import trio

from tributary.broker.context import CloseConnection, RequestContext
from tributary.broker.dispatch import decode_produce, respond, respond_produce
from tributary.broker.handlers.sasl_authenticate import authenticate_token
from tributary.broker.idle import IdleTimer
from tributary.broker.request_budget import BudgetLease
from tributary.broker.security.authentication import ConnectionAuthentication
from tributary.broker.security.listeners import PLAINTEXT
from tributary.broker.security.mechanisms import AuthenticationFailed
from tributary.broker.security.sasl import Phase, SaslSession
from tributary.broker.transport import receive_some, send_now, send_parts
from tributary.protocol.errors import ProtocolError
from tributary.protocol.framing import FrameDecoder
from tributary.protocol.headers import decode_request_header
from tributary.protocol.messages import ApiKey, ProduceRequest

if TYPE_CHECKING:
    from tributary.broker.state import Broker

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Response:
    """An encoded response and what to release once it is on the wire."""

    parts: list[bytes | Sized]
    after_send: list[Callable[[], None]]
    #: The connection closes once this response is written (a failed authentication).
    close_reason: str | None = None


@dataclass(slots=True)
class _Connection:
    """What the connection's three tasks share."""

    broker: Broker
    peer: str
    budget: BudgetLease
    idle: IdleTimer
    auth: ConnectionAuthentication
    stream: trio.abc.SendStream
    #: The writer task has responses in hand (see _queue_response).
    writing: bool = False


# Requests read ahead of the one being handled: bounds memory per connection
# while letting clients pipeline (librdkafka's default is 5 in flight).
MAX_QUEUED_REQUESTS = 16
# Responses handled but not yet written: the handler runs ahead of a slow reader
# by at most this many.
MAX_QUEUED_RESPONSES = 16
# The most one receive asks for: a large frame's body arrives in chunks this big.
RECEIVE_CHUNK = 256 * 1024
# The most the reader reads past the end of the frame it holds budget for (or
# before it knows the next frame's length): pipelined small requests still
# arrive many to a receive, and a connection holds at most this much unbudgeted.
READ_AHEAD = 64 * 1024
# Kafka's sasl.server.max.receive.size: the largest frame read before authentication.
SASL_MAX_RECEIVE_SIZE = 512 * 1024


async def serve_connection(
    broker: Broker, stream: trio.abc.Stream, peer: str, auth: ConnectionAuthentication | None = None
) -> None:
    """Serve one accepted connection; ``auth`` is what its listener established so far
    (default: a PLAINTEXT connection, ``User:ANONYMOUS``)."""
    auth = auth if auth is not None else ConnectionAuthentication(PLAINTEXT, PLAINTEXT)
    send_requests, receive_requests = trio.open_memory_channel[bytes](MAX_QUEUED_REQUESTS)
    send_responses, receive_responses = trio.open_memory_channel[Response](MAX_QUEUED_RESPONSES)
    budget = BudgetLease(broker.request_budget)
    # The nursery wraps what its tasks raise in an ExceptionGroup (trio's strict
    # exception groups), so the expected endings are caught with except*; anything
    # else propagates and is logged as a bug.
    try:
        # The idle timer moves this scope's deadline: when it passes, the connection's
        # tasks are cancelled wherever they wait.
        with trio.CancelScope() as idle_scope:
            idle = IdleTimer(idle_scope, broker.config.connections_max_idle_ms)
            conn = _Connection(broker, peer, budget, idle, auth, stream)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_read_frames, conn, stream, send_requests)
                nursery.start_soon(_write_responses, conn, stream, receive_responses)
                await _handle_requests(conn, receive_requests, send_responses)
        if conn.idle.expired:
            broker.metrics.connection_idle_closed()
            log.debug("closing connection %s: idle for %s ms", peer, broker.config.connections_max_idle_ms)
    except* (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError) as group:
        log.debug("connection %s lost: %s", peer, group.exceptions[0])
    except* CloseConnection as group:
        if auth.authenticated and auth.close_reason is None:
            # (Closes before authentication completed count as failed authentications.)
            broker.metrics.connection_closed_invalid()
        log.info("closing connection %s: %s", peer, group.exceptions[0])
    finally:
        # Requests queued but never handled, responses never written, a frame half read.
        budget.release_all()
        with trio.CancelScope(shield=True):
            await stream.aclose()


async def _read_frames(conn: _Connection, stream: trio.abc.ReceiveStream, send: trio.MemorySendChannel[bytes]) -> None:
    """Frame by frame: learn its length, take that much from the budget (waiting, unread,
    while it is spent), receive its body, queue it (waiting while the queue is full)."""
    decoder = FrameDecoder(conn.broker.config.socket_request_max_bytes)
    budget = conn.budget.budget
    async with send:
        while True:
            try:
                length = decoder.next_length()
            except ProtocolError as exc:
                if not conn.auth.authenticated:
                    conn.broker.metrics.authentication_failed(conn.auth.listener, "malformed")
                    raise CloseConnection(f"{exc} (before SASL authentication)") from None
                raise CloseConnection(str(exc)) from None
            if length is None:
                if not await _receive(conn, stream, decoder, READ_AHEAD):
                    return
                continue
            if length > SASL_MAX_RECEIVE_SIZE and not conn.auth.authenticated:
                conn.broker.metrics.authentication_failed(conn.auth.listener, "malformed")
                raise CloseConnection(
                    f"frame of {length} bytes before SASL authentication (at most {SASL_MAX_RECEIVE_SIZE})"
                )
            if not budget.fits(length):
                raise CloseConnection(
                    f"frame of {length} bytes exceeds queued.max.request.bytes ({budget.capacity}), "
                    "the memory for all requests in flight"
                )
            if not conn.budget.try_acquire(length):
                conn.idle.begin()  # waiting for the budget is the broker's doing, not an idle client
                try:
                    await conn.budget.acquire(length)
                finally:
                    conn.idle.end()
            while (frame := decoder.next_frame()) is None:
                if not await _receive(conn, stream, decoder, min(RECEIVE_CHUNK, max(decoder.missing, READ_AHEAD))):
                    return
            conn.idle.begin()  # a request in hand; the handler ends it
            try:
                # No trip through the scheduler per frame: the frames of one receive are
                # queued together, and the handler takes them together (see _next_frame).
                send.send_nowait(frame)
            except trio.WouldBlock:
                await send.send(frame)
            del frame  # not held while the next frame's budget is awaited


async def _receive(conn: _Connection, stream: trio.abc.ReceiveStream, decoder: FrameDecoder, max_bytes: int) -> bool:
    """Feed the decoder up to ``max_bytes``; False once the client has closed."""
    data = await receive_some(stream, max_bytes)
    if not data:
        if decoder.buffered:
            log.info("connection %s closed mid-frame (%d bytes buffered)", conn.peer, decoder.buffered)
        return False
    conn.idle.activity()
    decoder.feed(data)
    return True


async def _handle_requests(
    conn: _Connection, receive: trio.MemoryReceiveChannel[bytes], responses: trio.MemorySendChannel[Response]
) -> None:
    auth = conn.auth
    # Produce requests taken one after another, not answered yet (see _respond_produce).
    produce: list[tuple[RequestContext, ProduceRequest]] = []
    async with receive, responses:
        frame = await _next_frame(receive)
        while frame is not None:
            sasl = auth.sasl
            if sasl is not None and sasl.raw_tokens and sasl.phase is Phase.AUTHENTICATE:
                await _respond_produce(conn, produce, responses)
                await _answer_token(conn, sasl, frame, responses)
                frame = await _next_frame(receive)
                continue
            try:
                ctx = _context(conn, frame)
                request = decode_produce(ctx, frame)
            except CloseConnection:
                # The requests before it are answered as they would have been had they gone alone.
                await _respond_produce(conn, produce, responses)
                raise
            if request is not None:
                if request.acks == 0:  # its failure closes the connection: answered on its own
                    await _respond_produce(conn, produce, responses)
                    produce.append((ctx, request))
                    await _respond_produce(conn, produce, responses)
                else:
                    produce.append((ctx, request))
                del frame  # its records were copied out; its budget goes with the response
                # The next request if one is queued already: pipelined Produce requests are
                # answered together. Else the ones in hand are answered before waiting.
                frame = _queued_frame(receive)
                if frame is None:
                    await _respond_produce(conn, produce, responses)
                    frame = await _next_frame(receive)
                continue
            await _respond_produce(conn, produce, responses)
            await _respond(conn, ctx, frame, responses)
            del frame  # its memory goes now, not when the next request arrives
            if auth.close_reason is not None:
                # The writer closes the connection once that response is out; whatever the
                # client sends meanwhile is dropped unread.
                async for ignored in receive:
                    conn.budget.release(len(ignored))
                    conn.idle.end()
            frame = await _next_frame(receive)


async def _answer_token(
    conn: _Connection, sasl: SaslSession, frame: bytes, responses: trio.MemorySendChannel[Response]
) -> None:
    """After a v0 SaslHandshake: a raw token, answered with a raw token."""
    auth = conn.auth
    answer = await authenticate_token(conn.broker, auth, sasl, frame, conn.peer)
    conn.budget.release(len(frame))
    conn.idle.end()
    if isinstance(answer, AuthenticationFailed):
        raise CloseConnection(auth.close_reason or "authentication failed")
    await _queue_response(conn, responses, Response([struct.pack(">i", len(answer)) + answer], []))


def _context(conn: _Connection, frame: bytes) -> RequestContext:
    """The request's header read, the listener's rules applied: its context, which holds the
    frame's bytes against the budget until its response is on the wire."""
    broker = conn.broker
    auth = conn.auth
    try:
        envelope = decode_request_header(frame)
    except ProtocolError as exc:
        if not auth.authenticated:
            broker.metrics.authentication_failed(auth.listener, "malformed")
        raise CloseConnection(f"malformed request header: {exc}") from None
    if not auth.admits(envelope.api_key):
        broker.metrics.authentication_failed(auth.listener, "illegal_state")
        raise CloseConnection(
            f"{_api_name(envelope.api_key)} on listener {auth.listener} before SASL authentication completed "
            "(until then only ApiVersions, SaslHandshake and SaslAuthenticate are served)"
            if not auth.authenticated
            else f"{_api_name(envelope.api_key)} after SASL authentication completed (no re-authentication)"
        )
    return RequestContext(
        broker, envelope, conn.peer, auth.principal, auth.listener, auth, [partial(conn.budget.release, len(frame))]
    )


async def _respond(
    conn: _Connection, ctx: RequestContext, frame: bytes, responses: trio.MemorySendChannel[Response]
) -> None:
    """Handle one request and queue its response."""
    started = time.perf_counter()
    try:
        parts = await respond(ctx, frame)
    except BaseException:
        _release(ctx.after_send)
        raise
    envelope = ctx.envelope
    conn.broker.metrics.request_handled(envelope.api_key, envelope.api_version, time.perf_counter() - started)
    # Handled: a response the client does not read no longer keeps the connection open.
    conn.idle.end()
    if parts is None:
        _release(ctx.after_send)
    else:
        await _queue_response(conn, responses, Response(parts, ctx.after_send, conn.auth.close_reason))


async def _respond_produce(
    conn: _Connection,
    requests: list[tuple[RequestContext, ProduceRequest]],
    responses: trio.MemorySendChannel[Response],
) -> None:
    """Answer the Produce requests taken one after another (emptying the list), together
    (dispatch.respond_produce: each partition's records appended with one write), their
    responses queued as one: what a client pipelining small requests costs the broker per
    request drops to the decoding, the record check and the response's bytes."""
    if not requests:
        return
    taken = list(requests)
    requests.clear()
    started = time.perf_counter()
    try:
        answers = await respond_produce(taken)
    except BaseException:
        for ctx, _ in taken:
            _release(ctx.after_send)
        raise
    seconds = time.perf_counter() - started
    metrics = conn.broker.metrics
    parts: list[bytes | Sized] = []
    after_send: list[Callable[[], None]] = []
    for (ctx, _), answer in zip(taken, answers, strict=True):
        metrics.request_handled(ctx.envelope.api_key, ctx.envelope.api_version, seconds)
        conn.idle.end()
        if answer is None:
            _release(ctx.after_send)
        else:
            parts += answer
            after_send += ctx.after_send
    if parts:
        await _queue_response(conn, responses, Response(parts, after_send))


def _queued_frame(receive: trio.MemoryReceiveChannel[bytes]) -> bytes | None:
    """The next frame if it is queued already (no checkpoint), else None."""
    try:
        return receive.receive_nowait()
    except (trio.WouldBlock, trio.EndOfChannel):
        return None


async def _next_frame(receive: trio.MemoryReceiveChannel[bytes]) -> bytes | None:
    """The next queued frame, None once the reader is done. A frame already queued is taken
    without a checkpoint: a client pipelining requests (librdkafka keeps hundreds of small
    produce requests in flight) has them handled back to back, and their responses pile up
    for the writer, which sends them in one write, instead of one trip through the
    scheduler, and one send, per request. The handler still yields whenever the queue runs
    dry or the writer falls behind, so it holds the thread for a queue's worth at most."""
    try:
        return receive.receive_nowait()
    except trio.WouldBlock:
        pass
    except trio.EndOfChannel:
        return None
    try:
        return await receive.receive()
    except trio.EndOfChannel:
        return None


async def _queue_response(conn: _Connection, responses: trio.MemorySendChannel[Response], response: Response) -> None:
    """Hand a response to the writer, without a checkpoint while there is room (see _next_frame).

    When the writer has nothing in hand or queued, a response of bytes alone goes straight to a
    plain socket instead, as far as it takes it now (transport.send_now): a request that came
    alone is answered without waking the writer. What the socket does not take goes to the
    writer, behind which every later response queues, so they still leave in order."""
    parts = response.parts
    if (
        not conn.writing
        and response.close_reason is None
        and not responses.statistics().current_buffer_used
        and all(type(part) is bytes for part in parts)  # no file regions (a fetch's records)
    ):
        data = parts[0] if len(parts) == 1 else b"".join(parts)  # type: ignore[arg-type]
        assert isinstance(data, bytes)
        sent = send_now(conn.stream, data)
        if sent is not None:
            if sent:
                conn.idle.activity()
            if sent == len(data):
                _release(response.after_send)
                return
            response = Response([memoryview(data)[sent:]], response.after_send)
    try:
        responses.send_nowait(response)
    except trio.WouldBlock:
        await responses.send(response)


async def _write_responses(
    conn: _Connection, stream: trio.abc.SendStream, receive: trio.MemoryReceiveChannel[Response]
) -> None:
    """Send responses in order. Whatever is queued when the writer comes round
    goes out in one write: a client pipelining small produce requests gets its
    acknowledgements in a few segments instead of one syscall each."""
    sendfile = conn.broker.config.sendfile
    async with receive:
        try:
            async for first in receive:
                conn.writing = True
                batch = [first]
                while len(batch) < MAX_QUEUED_RESPONSES:
                    try:
                        batch.append(receive.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                try:
                    parts = [p for r in batch for p in r.parts]
                    await send_parts(stream, parts, sendfile=sendfile, progress=conn.idle.activity)
                finally:
                    for response in batch:
                        _release(response.after_send)
                closing = next((r.close_reason for r in batch if r.close_reason is not None), None)
                if closing is not None:
                    raise CloseConnection(closing)
                conn.writing = False
        finally:
            # Responses never sent (the connection died) still hold segment pins.
            while True:
                try:
                    _release(receive.receive_nowait().after_send)
                except (trio.WouldBlock, trio.EndOfChannel):
                    break


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"API key {api_key}"


def _release(callbacks: list[Callable[[], None]]) -> None:
    for release in callbacks:
        release()
