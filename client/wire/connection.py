"""One connection to one broker.

Theory of operation
-------------------
:func:`connect` opens a TCP stream (socket buffers set before connecting),
starts a reader and a writer task in a nursery of its own, negotiates
versions with ApiVersions (see ``versions.py``) and hands out a
:class:`BrokerConnection`; leaving the ``async with`` block cancels both
tasks and closes the socket, so nothing outlives it.

Requests are pipelined. :meth:`BrokerConnection.request` takes one of
``max_in_flight`` slots, gives the request the next correlation id, sends the
encoded frame and registers it in the in-flight queue, all without yielding,
so frames leave in correlation-id order. Sending means writing the frame from
the caller's task when nothing is queued before it and the socket takes it
(plain TCP: one ``write`` without a trip through the scheduler); what the
socket does not take, and every frame behind it, goes to the writer task,
which writes them in order. Kafka brokers answer a connection's requests in
order, so the reader matches each response to the oldest request in flight and
checks that the correlation ids agree; a mismatch means the stream cannot be
trusted and closes the connection. The reader wakes the waiting caller
directly, and the caller decodes its own response, so decoding work is spread
over the callers. :meth:`BrokerConnection.start` sends a request without a
waiting task: the reader hands the answer to a callback (the producer and the
mirror keep their requests in flight so, without a task per request).

A caller cancelled while waiting gives up on its response, not on the
request: the response is still read and dropped, and the slot is freed when
it arrives. A frame is written whole or not at all: the caller's write does
not yield, and a frame partly written is finished by the writer task, whatever
becomes of its caller, so a cancelled caller can never leave half a frame on
the wire. A request still queued for the writer when its caller is cancelled
is not sent at all.

Failures: a connection that breaks (EOF, reset, bad frame) fails every
request in flight with :class:`~client.errors.KafkaConnectionError`. A
request whose response does not arrive within its timeout raises
:class:`~client.errors.RequestTimedOutError` and closes the connection, as
Kafka's clients do: every response behind the missing one is stuck as well.
The reader keeps the deadlines (its cancel scope's deadline is at most the
earliest one in flight), so a request costs no cancel scope of its own.
A closed connection stays closed; the cluster's pool opens a new one.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import ssl
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import trio

from tributary.client._tasks import background_nursery
from tributary.client.config import ClientConfig
from tributary.client.errors import KafkaConnectionError, KafkaError, KafkaProtocolError, RequestTimedOutError
from tributary.client.security.login import sasl_login
from tributary.client.wire.buffers import ReceiveBuffers
from tributary.client.wire.versions import (
    FIRST_API_VERSIONS_VERSION,
    BrokerApiVersions,
    api_versions_request,
    decode_api_versions,
    retry_version,
)
from tributary.protocol.errors import ProtocolError
from tributary.protocol.framing import FrameDecoder
from tributary.protocol.headers import decode_response, encode_request, peek_correlation_id
from tributary.protocol.messages import ApiKey
from tributary.protocol.schema import Declared

log = logging.getLogger(__name__)

RECEIVE_CHUNK = 256 * 1024
#: A response taken writable (:meth:`BrokerConnection.exchange`) with at least this much still
#: to come is received straight into a pooled buffer (``buffers.py``) rather than in chunks.
DIRECT_RECEIVE_MIN = 64 * 1024
#: Over plain TCP the reader reads the socket itself and waits only when nothing is there; it
#: lets the other tasks run after this many reads in a row that did not wait.
READS_BETWEEN_YIELDS = 16
_Read = TypeVar("_Read", bytes, int)
_MAX_CORRELATION_ID = 2**31 - 1

#: A request its caller encodes: ``encode(correlation_id)`` is the whole frame (see :meth:`BrokerConnection.exchange`).
Encoder = Callable[[int], bytes]


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"API {api_key}"


#: Called once with what a request started by :meth:`BrokerConnection.start` came to: its
#: response frame (without the length prefix), or the error that ended it.
Answer = Callable[[bytes | KafkaError], object]


class _InFlight:
    """A request between being queued and being answered (or given up)."""

    __slots__ = (
        "abandoned",
        "api_key",
        "correlation_id",
        "deadline",
        "done",
        "expects_response",
        "failure",
        "frame",
        "on_answer",
        "sent",
        "timeout",
        "version",
        "waiter",
        "writable_response",
    )

    def __init__(
        self,
        correlation_id: int,
        api_key: int,
        version: int,
        expects_response: bool,
        *,
        deadline: float,
        timeout: float,
    ) -> None:
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.version = version
        self.expects_response = expects_response
        self.deadline = deadline
        self.timeout = timeout
        self.done = False
        self.frame: bytes | memoryview | None = None
        self.failure: KafkaError | None = None
        #: Its caller takes the response as a writable view it may change: a large one is
        #: received straight into a buffer (see :meth:`BrokerConnection._receive_into`).
        self.writable_response = False
        #: Some of its bytes were written (it cannot be withdrawn any more).
        self.sent = False
        #: Its caller gave up (cancelled): the answer is read and dropped.
        self.abandoned = False
        #: The task waiting for it (request, exchange), or the callback to call (start).
        self.waiter: trio.lowlevel.Task | None = None
        self.on_answer: Answer | None = None


def _abandon(pending: _InFlight) -> Callable[[Any], trio.lowlevel.Abort]:
    def abort(_: Any) -> trio.lowlevel.Abort:
        pending.waiter = None
        pending.abandoned = True  # cancelled from outside: the response is read and dropped
        return trio.lowlevel.Abort.SUCCEEDED

    return abort


class BrokerConnection:
    """A negotiated connection to one broker; made by :func:`connect`."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        *,
        config: ClientConfig,
        broker: int | str,
        address: str | None = None,
        buffers: ReceiveBuffers | None = None,
    ) -> None:
        self._stream = stream
        #: The socket's descriptor for writes straight from the caller (plain TCP only; -1 otherwise).
        self._fd = stream.socket.fileno() if isinstance(stream, trio.SocketStream) else -1
        #: Reads of ``_fd`` in a row that did not wait for the socket (see :meth:`_read`).
        self._unyielded_reads = 0
        self.config = config
        #: The broker's id, or ``host:port`` for a bootstrap server.
        self.broker = broker
        self.address = address
        self._slots = trio.Semaphore(config.max_in_flight)
        #: Frames (or their unwritten rest) for the writer task, in correlation-id order; the
        #: first one stays here while it is being written.
        self._send_queue: deque[tuple[_InFlight, bytes | memoryview]] = deque()
        self._write_wanted = trio.Event()
        self._in_flight: deque[_InFlight] = deque()
        #: The reader's cancel scope: its deadline is at most the earliest request's.
        self._read_scope: trio.CancelScope | None = None
        self._next_correlation_id = 0
        self._closed_reason: str | None = None
        self._closed = trio.Event()
        self._cancel_tasks = trio.CancelScope()
        self._versions: BrokerApiVersions | None = None
        #: Where large writable responses are received: the cluster's pool, shared by its
        #: connections, or one of this connection's own, made on first use.
        self._buffers = buffers

    # --- state ---------------------------------------------------------------------------------

    @property
    def versions(self) -> BrokerApiVersions:
        """What the broker advertised (available once :func:`connect` has returned it)."""
        if self._versions is None:
            raise RuntimeError("the connection has not negotiated its versions yet")
        return self._versions

    def api_version(self, api_key: int) -> int:
        """The version requests of ``api_key`` go out at: the highest both sides support."""
        return self.versions.pick(api_key)

    @property
    def closed(self) -> bool:
        return self._closed_reason is not None

    @property
    def closed_reason(self) -> str | None:
        return self._closed_reason

    @property
    def in_flight(self) -> int:
        """Requests sent (or queued) and not yet answered."""
        return 0 if self.closed else self.config.max_in_flight - self._slots.value

    def socket_buffer_sizes(self) -> tuple[int, int]:
        """(SO_SNDBUF, SO_RCVBUF) as the kernel reports them (Linux doubles what was set)."""
        sock = getattr(self._stream, "socket", None)
        if sock is None:
            raise RuntimeError("this connection does not run over a socket")
        return (
            int(sock.getsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_SNDBUF)),
            int(sock.getsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_RCVBUF)),
        )

    async def wait_closed(self) -> None:
        await self._closed.wait()

    def close(self, reason: str = "was closed by the client") -> None:
        """Close the connection: requests in flight fail, the tasks stop. The
        socket itself is closed when :func:`connect`'s block exits."""
        if self._closed_reason is not None:
            return
        self._closed_reason = reason
        failed = list(self._in_flight)
        failed.extend(pending for pending, _ in self._send_queue if not pending.expects_response)
        self._in_flight.clear()
        self._send_queue.clear()
        self._cancel_tasks.cancel()
        self._closed.set()
        # Wake a caller waiting for a slot; it sees the connection closed and passes
        # the slot on to the next one (see _exchange).
        self._slots.release()
        # Last, once the connection's state is settled: callbacks may start other requests.
        for pending in failed:
            if pending.failure is None:
                pending.failure = KafkaConnectionError(
                    f"connection to broker {self._where()} {reason} ({_api_name(pending.api_key)} "
                    f"{'in flight' if pending.sent else 'not sent'})",
                    broker=self.broker,
                )
            self._finish(pending)

    def _lost_error(self) -> KafkaConnectionError:
        return KafkaConnectionError(f"connection to broker {self._where()} {self._closed_reason}", broker=self.broker)

    def _where(self) -> str:
        return f"{self.broker} ({self.address})" if self.address and self.address != self.broker else f"{self.broker}"

    # --- requests ------------------------------------------------------------------------------

    async def request(
        self,
        body: Declared,
        *,
        version: int | None = None,
        timeout: float | None = None,
        expect_response: bool = True,
        on_queued: Callable[[], object] | None = None,
    ) -> Any:
        """Send ``body`` and return the decoded response.

        ``version`` defaults to the highest both sides support; ``timeout`` to
        the configured request timeout. ``expect_response=False`` is for the
        one request Kafka does not answer (Produce with acks=0): it returns
        None once the frame has been written. ``on_queued`` is called (in the
        caller's task, without yielding) as soon as the request has its place
        in the connection's send order: the producer starts its requests one
        by one with it, so that batches of a partition leave in order although
        Trio runs the requesting tasks in no fixed order."""
        api_key = type(body).SPEC.api_key
        assert api_key is not None, f"{type(body).__name__} is not a request"
        version = self.versions.pick(api_key) if version is None else self.versions.check(api_key, version)
        frame = await self._exchange(body, api_key, version, timeout, expect_response, on_queued=on_queued)
        if frame is None:
            return None
        return self.decode(api_key, version, frame)

    def decode(self, api_key: int, version: int, frame: bytes | memoryview) -> Any:
        """A response frame decoded (as :meth:`request` returns it); a malformed one raises
        :class:`~client.errors.KafkaProtocolError`."""
        try:
            _, response = decode_response(api_key, version, frame)
        except ProtocolError as exc:
            raise KafkaProtocolError(
                f"malformed {_api_name(api_key)} v{version} response from broker {self._where()}: {exc}",
                broker=self.broker,
            ) from exc
        return response

    async def exchange(
        self,
        api_key: int,
        version: int,
        encode: Encoder,
        *,
        timeout: float | None = None,
        expect_response: bool = True,
        on_queued: Callable[[], object] | None = None,
        writable_response: bool = False,
    ) -> bytes | memoryview | None:
        """Send a request the caller encoded and return its response frame undecoded (the
        response header first), or None for a request Kafka does not answer.

        ``encode(correlation_id)`` returns the whole request frame at ``version`` (length
        prefix and request header included, as :func:`protocol.headers.encode_request` writes
        them); the version must be one both sides support (:meth:`api_version`). This is for
        the hot paths that read only what they need of an answer (the mirror's raw produce and
        fetch, ``client/raw/wire.py``); everything else uses :meth:`request`. ``on_queued`` as there.

        With ``writable_response`` the frame may be a writable ``memoryview`` the caller may
        change: a large response then arrives straight into a buffer over plain TCP, copied
        once (the mirror stamps fetched batches in place). The buffer is the connection's to
        use again once no view of it is left (``client/wire/buffers.py``). Otherwise, and
        always over TLS, the frame is ``bytes``."""
        version = self.versions.check(api_key, version)
        return await self._exchange(
            encode,
            api_key,
            version,
            timeout,
            expect_response,
            on_queued=on_queued,
            writable_response=writable_response,
        )

    def start(
        self,
        api_key: int,
        version: int,
        body: Declared | Encoder,
        on_answer: Answer,
        *,
        timeout: float | None = None,
    ) -> None:
        """Send a request without waiting for its answer: ``on_answer`` gets the response frame
        (undecoded, as :meth:`exchange` returns it; :meth:`decode` decodes it) or the
        :class:`~client.errors.KafkaError` that ended the request, exactly once.

        ``body`` is a request message or an :data:`Encoder`. The request takes its place in the
        send order before this returns (no checkpoint: call it from synchronous code). It takes
        a free in-flight slot or raises :class:`trio.WouldBlock`; a closed connection raises
        :class:`~client.errors.KafkaConnectionError`. Only for requests that are answered.

        ``on_answer`` runs in whichever task settles the request: the connection's reader
        (the answer, a timeout) or the task that closes the connection; it must not block and
        must not raise. This is how the producer and the mirror keep requests in flight
        without a task each."""
        if self._closed_reason is not None:
            raise self._lost_error()
        version = self.versions.check(api_key, version)
        self._slots.acquire_nowait()
        timeout = self.config.request_timeout if timeout is None else timeout
        pending = self._queue(body, api_key, version, True, deadline=trio.current_time() + timeout, timeout=timeout)
        pending.on_answer = on_answer

    async def _exchange(
        self,
        body: Declared | Encoder,
        api_key: int,
        version: int,
        timeout: float | None,
        expect_response: bool,
        *,
        on_queued: Callable[[], object] | None = None,
        writable_response: bool = False,
    ) -> bytes | memoryview | None:
        """Send one request; its response frame (without the length prefix)."""
        if self._closed_reason is not None:
            raise self._lost_error()
        timeout = self.config.request_timeout if timeout is None else timeout
        deadline = trio.current_time() + timeout
        waiting: trio.CancelScope | None = None
        try:
            # A free slot is taken at once: no cancel scope and no trip through the scheduler
            # (the wait for the answer below is this call's checkpoint).
            self._slots.acquire_nowait()
        except trio.WouldBlock:
            with trio.move_on_at(deadline) as waiting:
                await self._slots.acquire()
        if waiting is not None and waiting.cancelled_caught:
            raise RequestTimedOutError(
                f"{_api_name(api_key)} to broker {self._where()}: no free in-flight slot within {timeout:g} s "
                f"({self.config.max_in_flight} requests in flight)",
                broker=self.broker,
            )
        if self._closed_reason is not None:
            self._slots.release()
            raise self._lost_error()
        pending = self._queue(body, api_key, version, expect_response, deadline=deadline, timeout=timeout)
        pending.writable_response = writable_response
        if on_queued is not None:
            on_queued()
        if expect_response:
            # The reader keeps the deadline (it closes the connection when it passes).
            await self._wait(pending)
        else:
            # Nothing to read: the deadline is the caller's, for a writer that cannot write.
            with trio.move_on_at(deadline):
                await self._wait(pending)
            if not pending.done:
                message = (
                    f"{_api_name(api_key)} v{version} (correlation id {pending.correlation_id}) to broker "
                    f"{self._where()} was not written within {timeout:g} s"
                )
                self.close(f"was closed after a request timed out: {message}")
                raise RequestTimedOutError(message, broker=self.broker)
        if pending.failure is not None:
            raise pending.failure
        return pending.frame

    async def _wait(self, pending: _InFlight) -> None:
        """Until ``pending`` is settled; a cancelled caller abandons it."""
        if pending.done:
            await trio.lowlevel.checkpoint()
            return
        pending.waiter = trio.lowlevel.current_task()
        await trio.lowlevel.wait_task_rescheduled(_abandon(pending))

    def _finish(self, pending: _InFlight) -> None:
        """``pending`` is settled (frame or failure set): wake its caller or call its callback."""
        pending.done = True
        if pending.waiter is not None:
            trio.lowlevel.reschedule(pending.waiter)
            pending.waiter = None
        elif pending.on_answer is not None:
            on_answer, pending.on_answer = pending.on_answer, None
            if pending.failure is not None:
                on_answer(pending.failure)
            else:
                # start() never takes a writable response, so its frame is bytes.
                assert isinstance(pending.frame, bytes)
                on_answer(pending.frame)

    def _queue(
        self,
        body: Declared | Encoder,
        api_key: int,
        version: int,
        expect_response: bool,
        *,
        deadline: float,
        timeout: float,
    ) -> _InFlight:
        """Number, encode and send (or queue) a request; no checkpoint, so ids leave in order."""
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) % _MAX_CORRELATION_ID
        try:
            if callable(body):
                frame = body(correlation_id)
            else:
                frame = encode_request(body, version, correlation_id, self.config.client_id)
        except BaseException:
            self._slots.release()
            raise
        pending = _InFlight(correlation_id, api_key, version, expect_response, deadline=deadline, timeout=timeout)
        if expect_response:
            self._in_flight.append(pending)
            scope = self._read_scope
            if scope is not None and deadline < scope.deadline:
                scope.deadline = deadline
        self._send(pending, frame)
        return pending

    def _send(self, pending: _InFlight, frame: bytes) -> None:
        """Write ``frame`` from here when nothing is queued before it and the socket takes it
        (no task switch); what it does not take goes to the writer task."""
        queue = self._send_queue
        rest: bytes | memoryview = frame
        if not queue and self._fd >= 0:
            try:
                written = os.write(self._fd, frame)
            except OSError:  # full (BlockingIOError), or broken: the writer meets it again and closes
                written = 0
            if written:
                pending.sent = True
                if written == len(frame):
                    if not pending.expects_response:
                        self._slots.release()
                        pending.done = True
                    return
                rest = memoryview(frame)[written:]
        queue.append((pending, rest))
        if len(queue) == 1:
            self._write_wanted.set()

    # --- background tasks --------------------------------------------------------------------

    async def _run(self) -> None:
        """The reader and the writer, until the connection closes."""
        with self._cancel_tasks:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read_loop)
                nursery.start_soon(self._write_loop)

    async def _write_loop(self) -> None:
        queue = self._send_queue
        try:
            while True:
                if not queue:
                    wanted = self._write_wanted = trio.Event()
                    await wanted.wait()
                    continue
                pending, frame = queue[0]
                if pending.abandoned and not pending.sent:
                    queue.popleft()
                    self._drop_unsent(pending)
                    continue
                pending.sent = True
                await self._stream.send_all(frame)
                if self._closed_reason is not None:
                    return
                queue.popleft()
                if not pending.expects_response:
                    self._slots.release()
                    self._finish(pending)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self.close(f"broke while sending: {exc or type(exc).__name__}")

    def _drop_unsent(self, pending: _InFlight) -> None:
        if pending.expects_response:
            self._in_flight.remove(pending)
        self._slots.release()

    async def _read_loop(self) -> None:
        decoder = FrameDecoder(self.config.max_response_size)
        receive_some = self._stream.receive_some
        # Plain TCP: the socket is read here directly (see _read), and a large response its
        # caller takes writable is received straight into its buffer.
        fd = self._fd
        in_flight = self._in_flight
        try:
            while True:
                deadline = min((pending.deadline for pending in in_flight), default=math.inf)
                with trio.CancelScope(deadline=deadline) as scope:
                    self._read_scope = scope
                    while True:
                        data = await (self._read(fd, RECEIVE_CHUNK) if fd >= 0 else receive_some(RECEIVE_CHUNK))
                        if not data:
                            self._broker_closed()
                            return
                        decoder.feed(data)
                        for frame in decoder.frames():
                            self._deliver(frame)
                            if self._closed_reason is not None:
                                return
                        # (Cheap tests first: most connections never take a writable response.)
                        if (
                            fd >= 0
                            and in_flight
                            and in_flight[0].writable_response
                            and decoder.missing >= DIRECT_RECEIVE_MIN
                        ):
                            whole = await self._receive_into(fd, decoder)
                            if whole is None:
                                return
                            self._deliver(whole)
                            del whole  # the buffer is free again once its caller is done with it
                            if self._closed_reason is not None:
                                return
                # The deadline passed (it may have been an answered request's: look again).
                now = trio.current_time()
                for pending in self._in_flight:
                    if pending.deadline <= now:
                        self._time_out(pending)
                        return
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self.close(f"broke while receiving: {exc or type(exc).__name__}")
        except (ProtocolError, KafkaError) as exc:
            self.close(f"was closed after a bad response: {exc}")

    async def _read(self, fd: int, size: int) -> bytes:
        """Up to ``size`` bytes of the socket (b"" at its end), read without a trip through the
        scheduler when they are there already. Trio's ``receive_some`` yields after every read
        that succeeds, and tries once more before it waits: for a stream of small answers (a
        mirror's Produce responses) that was two reads and two scheduler trips per answer. The
        wait for the socket is the checkpoint (cancellation, the deadline); a socket that never
        runs dry still yields every ``READS_BETWEEN_YIELDS`` reads."""
        return await self._read_with(os.read, fd, size)

    async def _read_into(self, fd: int, view: memoryview) -> int:
        """:meth:`_read`, into ``view``: the number of bytes received (0 at the socket's end)."""
        return await self._read_with(os.readv, fd, (view,))

    async def _read_with(self, read: Callable[[int, Any], _Read], fd: int, into: Any) -> _Read:
        while True:
            try:
                data = read(fd, into)
            except BlockingIOError:
                self._unyielded_reads = 0
                await trio.lowlevel.wait_readable(fd)
                continue
            self._unyielded_reads += 1
            if self._unyielded_reads >= READS_BETWEEN_YIELDS:
                self._unyielded_reads = 0
                await trio.lowlevel.checkpoint()
            return data

    async def _receive_into(self, fd: int, decoder: FrameDecoder) -> memoryview | None:
        """The response frame ``decoder`` has begun, its rest received straight into a pooled
        buffer (the kernel's copy is the only one); None if the broker closed the connection
        first."""
        length = decoder.next_length()
        assert length is not None
        if self._buffers is None:
            self._buffers = ReceiveBuffers(max_bytes=self.config.response_buffer_pool_bytes)
        view = self._buffers.take(length)
        filled = decoder.move_incomplete(view)
        while filled < length:
            received = await self._read_into(fd, view[filled:])
            if not received:
                self._broker_closed()
                return None
            filled += received
        return view

    def _broker_closed(self) -> None:
        self.close(
            "was closed by the broker" + (f" with {len(self._in_flight)} requests in flight" if self._in_flight else "")
        )

    def _time_out(self, pending: _InFlight) -> None:
        """No answer to ``pending`` in time: every answer behind it is stuck too, so the
        connection closes (as Kafka's clients do)."""
        message = (
            f"{_api_name(pending.api_key)} v{pending.version} (correlation id {pending.correlation_id}) to broker "
            f"{self._where()} got no response within {pending.timeout:g} s"
        )
        pending.failure = RequestTimedOutError(message, broker=self.broker)
        self.close(f"was closed after a request timed out: {message}")

    def _deliver(self, frame: bytes | memoryview) -> None:
        correlation_id = peek_correlation_id(frame)
        in_flight = self._in_flight
        if not in_flight:
            raise KafkaProtocolError(f"response with correlation id {correlation_id} but no request in flight")
        pending = in_flight[0]
        if pending.correlation_id != correlation_id:
            raise KafkaProtocolError(
                f"response with correlation id {correlation_id}, expected {pending.correlation_id} "
                f"({_api_name(pending.api_key)})"
            )
        in_flight.popleft()
        self._slots.release()
        if pending.abandoned:
            return
        pending.frame = frame
        self._finish(pending)

    # --- negotiation -------------------------------------------------------------------------

    async def _negotiate(self) -> BrokerApiVersions:
        version = FIRST_API_VERSIONS_VERSION
        for _ in range(2):
            frame = await self._exchange(api_versions_request(), ApiKey.API_VERSIONS, version, None, True)
            assert frame is not None
            _, response, decoded_at = decode_api_versions(frame, version)
            if decoded_at != version:  # UNSUPPORTED_VERSION: the body was v0
                version = retry_version(response, version, self.broker)
                log.debug("broker %s refused ApiVersions v%d; retrying at v%d", self.broker, decoded_at, version)
                continue
            self._versions = BrokerApiVersions.from_response(response, self.broker, version)
            return self._versions
        raise KafkaProtocolError(f"broker {self._where()} refused ApiVersions twice", broker=self.broker)

    async def _login(self) -> None:
        """The SASL exchange (client/security/login.py), before anything else is sent."""
        login = sasl_login(self.config.security, self.versions, self.broker)
        step = next(login)
        while True:
            request, version = step
            response = await self.request(request, version=version)
            try:
                step = login.send(response)
            except StopIteration:
                return


async def _open_socket_stream(host: str, port: int, config: ClientConfig) -> trio.SocketStream:
    """A connected TCP stream with the configured socket buffers set before connecting."""
    infos = await trio.socket.getaddrinfo(host, port, type=trio.socket.SOCK_STREAM)
    errors: list[str] = []
    for family, type_, proto, _, address in infos:
        sock = trio.socket.socket(family, type_, proto)
        try:
            if config.send_buffer_bytes is not None:
                sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_SNDBUF, config.send_buffer_bytes)
            if config.receive_buffer_bytes is not None:
                sock.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_RCVBUF, config.receive_buffer_bytes)
            await sock.connect(address)
        except OSError as exc:
            sock.close()
            errors.append(os.strerror(exc.errno) if exc.errno else str(exc))
            continue
        except BaseException:
            sock.close()
            raise
        stream = trio.SocketStream(sock)
        _unlimit_unsent(stream)
        return stream
    raise OSError("; ".join(errors) or "no address")


def _unlimit_unsent(stream: trio.SocketStream) -> None:
    """Give the socket back the system's TCP_NOTSENT_LOWAT (0 means the sysctl's, unlimited
    by default), as Kafka's clients have it. Trio sets 16 KiB, which keeps little unsent data
    in the kernel for interactive streams; but a frame here is written whole and in order
    anyway, and with that limit a write of several pipelined Produce requests stops at 16 KiB
    unsent, leaving the rest to the writer task in 16 KiB steps, a wake-up each (counted in
    the mirror with 1 MiB batches: 120 of 160 MB written that way)."""
    option = getattr(trio.socket, "TCP_NOTSENT_LOWAT", None)
    if option is not None:
        with contextlib.suppress(OSError):
            stream.setsockopt(trio.socket.IPPROTO_TCP, option, 0)


@asynccontextmanager
async def connect(
    host: str,
    port: int,
    *,
    config: ClientConfig | None = None,
    broker: int | str | None = None,
    buffers: ReceiveBuffers | None = None,
) -> AsyncIterator[BrokerConnection]:
    """Open and negotiate a connection to ``host:port``; it is closed when the block exits.

    ``broker`` (the broker's id) is used in error messages; it defaults to
    ``host:port``. Raises :class:`~client.errors.KafkaConnectionError` when the
    broker cannot be reached or negotiation fails within ``connect_timeout``."""
    config = config or ClientConfig()
    address = f"{host}:{port}"
    who = broker if broker is not None else address
    stream: trio.abc.Stream
    try:
        with trio.fail_after(config.connect_timeout):
            stream = await _open_socket_stream(host, port, config)
            if config.security.tls:
                stream = await _tls(stream, host, config)
    except (OSError, trio.TooSlowError, trio.BrokenResourceError) as exc:
        if isinstance(exc, trio.TooSlowError):
            reason: object = f"no connection within {config.connect_timeout:g} s"
        elif isinstance(exc, trio.BrokenResourceError):
            reason = f"TLS handshake failed: {_tls_reason(exc)}"
        else:
            reason = exc
        raise KafkaConnectionError(
            f"cannot connect to broker {who}" + (f" ({address})" if who != address else "") + f": {reason}",
            broker=who,
        ) from None
    async with open_on_stream(stream, config=config, broker=who, address=address, buffers=buffers) as conn:
        yield conn


async def _tls(stream: trio.SocketStream, host: str, config: ClientConfig) -> trio.SSLStream[trio.SocketStream]:
    """The TLS handshake on a fresh TCP stream (SSL and SASL_SSL listeners)."""
    tls = trio.SSLStream(stream, config.security.ssl_context(), server_hostname=host)
    try:
        await tls.do_handshake()
    except BaseException:
        await trio.aclose_forcefully(tls)
        raise
    return tls


def _tls_reason(exc: trio.BrokenResourceError) -> str:
    cause = exc.__cause__
    if isinstance(cause, ssl.SSLCertVerificationError):
        return cause.verify_message or str(cause)
    if isinstance(cause, ssl.SSLError):
        return cause.reason or str(cause)
    return str(cause or exc) or "the broker closed the connection"


@asynccontextmanager
async def open_on_stream(
    stream: trio.abc.Stream,
    *,
    config: ClientConfig | None = None,
    broker: int | str = "?",
    address: str | None = None,
    buffers: ReceiveBuffers | None = None,
) -> AsyncIterator[BrokerConnection]:
    """Run a connection over an already open stream (a TLS stream, a test's memory
    stream); the stream is closed when the block exits. ``buffers``: the pool its large
    writable responses are received into (shared with other connections of one Trio run)."""
    config = config or ClientConfig()
    conn = BrokerConnection(stream, config=config, broker=broker, address=address, buffers=buffers)
    try:
        async with background_nursery() as nursery:
            nursery.start_soon(conn._run)
            try:
                with trio.fail_after(config.connect_timeout):
                    await conn._negotiate()
            except (trio.TooSlowError, KafkaConnectionError, RequestTimedOutError) as exc:
                reason = "no ApiVersions answer in time" if isinstance(exc, trio.TooSlowError) else str(exc)
                raise KafkaConnectionError(
                    f"cannot negotiate versions with broker {conn._where()}: {reason}", broker=broker
                ) from None
            if config.security.sasl:
                try:
                    with trio.fail_after(config.connect_timeout):
                        await conn._login()
                except (trio.TooSlowError, KafkaConnectionError, RequestTimedOutError) as exc:
                    reason = "no answer in time" if isinstance(exc, trio.TooSlowError) else str(exc)
                    raise KafkaConnectionError(
                        f"SASL login to broker {conn._where()} failed: {reason}", broker=broker
                    ) from None
            try:
                yield conn
            finally:
                conn.close()
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()


__all__ = ["BrokerConnection", "connect", "open_on_stream"]
