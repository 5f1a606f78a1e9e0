"""A fault-injecting TCP proxy, written with trio: the wide-area link between a client and brokers.

Each route listens on a loopback port and forwards bytes both ways to one
upstream address (a broker). The link it stands for can be:

- **up**: bytes pass as they come;
- **cut**: every faulted connection is reset (RST, as a dropped link or a
  rebooted peer) and new ones are reset as soon as their first request has
  been read, until the link is restored;
- **stalled** (a blackhole): nothing passes and nothing is closed; bytes wait
  in the proxy and the kernel's buffers and flow again on restore, as TCP's
  retransmissions would carry them over a link that drops every packet for
  a while;
- **slow**: each direction is capped at ``rate`` bytes per second, shared by
  every faulted connection of every route (one link), by a token bucket;
- **far**: every chunk arrives ``latency`` seconds after it crossed the link, each
  way, without holding back the chunks behind it (the pipe stays full, as on a
  long link); with ``jitter``, each chunk is late by a further random share of up
  to ``jitter`` seconds (uniform, from the proxy's seeded generator), yet never
  overtakes the chunk before it on its connection, as TCP delivers in order. It
  combines with a rate cap.

The counters (:class:`Stats`) count a byte when it crosses the link, whether or
not the far side has read it yet, so a window between two snapshots measures
exactly what the link let through.

Faults hit only the connections ``faulted(client_id)`` selects, from the
client id of the connection's first Kafka request, so one test can cut the
mirror off its source while its producer keeps writing into the same brokers.

:class:`FaultyProxy` is the trio part (run it in a nursery, change the link
with :meth:`FaultyProxy.set_link`); :class:`ProxyThread` runs it in a thread
of its own for synchronous tests.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import random
import socket
import struct
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import trio

#: Largest chunk read at once; under a rate cap chunks are smaller (see :meth:`Link.chunk_size`).
MAX_CHUNK = 64 * 1024
#: A token bucket's burst, as a fraction of its rate: small, so a cap is felt within a second.
BURST_FRACTION = 0.05
#: Chunks that crossed the link and wait for their latency to pass, per connection and direction:
#: at 64 KiB each, 64 MiB, more than a 100 ms link carries at 500 MB/s.
MAX_CHUNKS_IN_FLIGHT = 1024
T = TypeVar("T")
#: A chunk that crossed the link: when it is due at the far side, and its bytes.
Crossed = tuple[float, bytes | bytearray]
_REQUEST_PREFIX = struct.Struct(">ihhih")  # size, api key, api version, correlation id, client id length


class LinkMode(enum.Enum):
    UP = "up"
    CUT = "cut"
    STALLED = "stalled"


def client_id_of(frame_start: bytes) -> tuple[bool, str | None]:
    """(complete, client id) of a Kafka request whose first bytes are ``frame_start``;
    ``complete`` is False while more bytes are needed. Every request header version from 1 on
    starts with size, api key, api version, correlation id and a length-prefixed (or -1) id."""
    if len(frame_start) < _REQUEST_PREFIX.size:
        return False, None
    length = _REQUEST_PREFIX.unpack_from(frame_start)[4]
    if length < 0:
        return True, None
    end = _REQUEST_PREFIX.size + length
    if len(frame_start) < end:
        return False, None
    return True, frame_start[_REQUEST_PREFIX.size : end].decode("utf-8", "replace")


class TokenBucket:
    """``rate`` bytes per second in each call's share; ``take`` may run the bucket into debt
    and sleeps until the debt is paid, so concurrent takers share the rate fairly."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.burst = max(1.0, rate * BURST_FRACTION)
        self.tokens = self.burst
        self.updated = trio.current_time()

    def take(self, amount: int) -> float:
        """Take ``amount`` bytes now; the seconds to wait before sending them."""
        now = trio.current_time()
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        self.tokens -= amount
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate


@dataclass(eq=False)
class Link:
    """The state every faulted connection obeys. Changes wake every waiter."""

    mode: LinkMode = LinkMode.UP
    rate: float | None = None
    latency: float = 0.0
    jitter: float = 0.0
    buckets: dict[str, TokenBucket] = field(default_factory=dict)
    changed: trio.Event = field(default_factory=trio.Event)
    #: Bumped on every cut: a connection that saw an older value must be reset.
    cuts: int = 0

    def set(self, mode: LinkMode, rate: float | None = None, latency: float = 0.0, jitter: float = 0.0) -> None:
        if rate is not None and rate <= 0:
            raise ValueError("rate must be positive")
        if latency < 0:
            raise ValueError("latency must not be negative")
        if jitter < 0:
            raise ValueError("jitter must not be negative")
        self.mode = mode
        self.rate = rate
        self.latency = latency
        self.jitter = jitter
        self.buckets = {} if rate is None else {d: TokenBucket(rate) for d in ("up", "down")}
        if mode is LinkMode.CUT:
            self.cuts += 1
        self.changed.set()
        self.changed = trio.Event()

    def chunk_size(self) -> int:
        if self.rate is None:
            return MAX_CHUNK
        return max(1024, min(MAX_CHUNK, int(self.rate * BURST_FRACTION)))

    async def passage(self, direction: str, amount: int) -> None:
        """Wait until ``amount`` bytes may cross the link in ``direction`` ("up": client to
        server, "down": back). Raises :class:`LinkCut` when the link is cut meanwhile."""
        while True:
            if self.mode is LinkMode.CUT:
                raise LinkCut
            if self.mode is LinkMode.STALLED:
                await self.changed.wait()
                continue
            bucket = self.buckets.get(direction)
            if bucket is None:
                return
            delay = bucket.take(amount)
            if delay <= 0:
                return
            changed = self.changed
            with trio.move_on_after(delay):
                await changed.wait()
                continue  # the link changed while waiting: obey the new state for these bytes
            return


class LinkCut(Exception):
    """The link was cut under a connection."""


class Delay:
    """When the chunks of one direction of one connection arrive, sans-IO: ``latency`` after
    they crossed the link, plus up to ``jitter`` drawn from ``rng``, but never before the chunk
    ahead of them (a stream is delivered in order, however late each packet was)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.last = float("-inf")

    def due(self, crossed_at: float, latency: float, jitter: float) -> float:
        extra = self.rng.uniform(0.0, jitter) if jitter > 0 else 0.0
        self.last = max(self.last, crossed_at + latency + extra)
        return self.last


@dataclass
class Stats:
    """Counters since the proxy started. A snapshot also says when it was taken (``at``, the
    proxy's clock), so two snapshots bound a window exactly."""

    at: float = 0.0
    accepted: int = 0
    refused: int = 0
    reset: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    faulted_bytes_down: int = 0
    #: Faulted connections open now.
    faulted_open: int = 0


def reset(stream: trio.SocketStream) -> None:
    """Make the coming close send RST instead of FIN, as a broken link does."""
    with contextlib.suppress(OSError):
        stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


class FaultyProxy:
    """Forwards ``listen port -> upstream (host, port)`` for every route."""

    def __init__(
        self,
        upstreams: Sequence[tuple[str, int]],
        *,
        faulted: Callable[[str | None], bool] = lambda _client_id: True,
        host: str = "127.0.0.1",
        seed: int | None = None,
    ) -> None:
        self.upstreams = list(upstreams)
        self.faulted = faulted
        self.host = host
        #: Draws the jitter; seeded, a run's delays can be had again.
        self.random = random.Random(seed)
        self.link = Link()
        self.stats = Stats()
        self.ports: list[int] = []

    def set_link(self, mode: LinkMode, rate: float | None = None, latency: float = 0.0, jitter: float = 0.0) -> Stats:
        """Change the link; returns the counters as they stood at the change, taken in the
        same step, so a window measured from it holds no byte of the link's previous state."""
        snapshot = self.snapshot()
        self.link.set(mode, rate, latency, jitter)
        return snapshot

    def snapshot(self) -> Stats:
        return dataclasses.replace(self.stats, at=trio.current_time())

    async def run(self, *, task_status: trio.TaskStatus[list[int]] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen on a free port per upstream; ``task_status.started(ports)``."""
        async with trio.open_nursery() as nursery:
            for upstream in self.upstreams:
                listeners = await trio.open_tcp_listeners(0, host=self.host)
                self.ports.append(listeners[0].socket.getsockname()[1])
                handler = self._handler(upstream)
                nursery.start_soon(trio.serve_listeners, handler, listeners)
            task_status.started(list(self.ports))

    def _handler(self, upstream: tuple[str, int]) -> Callable[[trio.SocketStream], Awaitable[None]]:
        async def handle(client: trio.SocketStream) -> None:
            self.stats.accepted += 1
            try:
                await self._serve(client, upstream)
            finally:
                await trio.aclose_forcefully(client)

        return handle

    async def _first_bytes(self, client: trio.SocketStream) -> tuple[bytes, str | None]:
        data = b""
        while True:
            complete, client_id = client_id_of(data)
            if complete:
                return data, client_id
            chunk = await client.receive_some(MAX_CHUNK)
            if not chunk:
                return data, None
            data += chunk

    async def _serve(self, client: trio.SocketStream, upstream: tuple[str, int]) -> None:
        link = self.link
        first, client_id = await self._first_bytes(client)
        faulted = self.faulted(client_id)
        if faulted:
            while link.mode is LinkMode.STALLED:  # a blackholed connect: it waits for the link
                await link.changed.wait()
            if link.mode is LinkMode.CUT:
                self.stats.refused += 1
                reset(client)
                return
        try:
            server = await trio.open_tcp_stream(*upstream)
        except OSError:
            reset(client)
            return
        cuts = link.cuts
        self.stats.faulted_open += faulted
        try:
            await server.send_all(first)
            self.stats.bytes_up += len(first)
            async with trio.open_nursery() as nursery:
                if faulted:
                    nursery.start_soon(self._watch_cut, cuts, nursery.cancel_scope, client)
                nursery.start_soon(self.pump, client, server, "up", faulted, nursery.cancel_scope)
                nursery.start_soon(self.pump, server, client, "down", faulted, nursery.cancel_scope)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            reset(client)
        finally:
            self.stats.faulted_open -= faulted
            await trio.aclose_forcefully(server)

    async def _watch_cut(self, cuts: int, scope: trio.CancelScope, client: trio.SocketStream) -> None:
        while self.link.cuts == cuts:
            await self.link.changed.wait()
        self.stats.reset += 1
        reset(client)
        scope.cancel()

    async def pump(
        self,
        src: trio.abc.ReceiveStream,
        dst: trio.abc.SendStream,
        direction: str,
        faulted: bool,
        scope: trio.CancelScope,
    ) -> None:
        """Copy ``src`` to ``dst`` through the link until either side closes or the link is cut.

        One task reads and lets each chunk cross the link (rate cap, stall, cut); another
        delivers it once its latency has passed, so a far link delays every chunk by the
        latency but not by the chunks before it."""
        send, receive = trio.open_memory_channel[Crossed](MAX_CHUNKS_IN_FLIGHT)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._deliver, receive, dst)
                async with send:
                    await self._cross(src, send, direction, faulted)
        except* LinkCut:
            pass  # _watch_cut resets the client
        except* (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        scope.cancel()  # one side is gone: so is the connection

    async def _cross(
        self, src: trio.abc.ReceiveStream, crossed: trio.MemorySendChannel[Crossed], direction: str, faulted: bool
    ) -> None:
        stats = self.stats
        delay = Delay(self.random)
        while True:
            size = self.link.chunk_size() if faulted else MAX_CHUNK
            data = await src.receive_some(size)
            if not data:
                return
            due = trio.current_time()
            if faulted:
                await self.link.passage(direction, len(data))
                link = self.link
                due = delay.due(trio.current_time(), link.latency, link.jitter)
            if direction == "up":
                stats.bytes_up += len(data)
            else:
                stats.bytes_down += len(data)
                if faulted:
                    stats.faulted_bytes_down += len(data)
            await crossed.send((due, data))

    @staticmethod
    async def _deliver(crossed: trio.MemoryReceiveChannel[Crossed], dst: trio.abc.SendStream) -> None:
        async with crossed:
            async for due, data in crossed:
                await trio.sleep_until(due)
                await dst.send_all(data)


class ProxyThread:
    """A :class:`FaultyProxy` in a thread of its own, driven from synchronous code."""

    def __init__(
        self,
        upstreams: Sequence[tuple[str, int]],
        *,
        faulted: Callable[[str | None], bool] = lambda _c: True,
        seed: int | None = None,
    ) -> None:
        self.proxy = FaultyProxy(upstreams, faulted=faulted, seed=seed)
        self._thread = threading.Thread(target=self._main, name="faulty-proxy", daemon=True)
        self._started = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._error: BaseException | None = None

    @property
    def ports(self) -> list[int]:
        return self.proxy.ports

    @property
    def native_id(self) -> int | None:
        """The proxy thread's id for the operating system (``/proc/<pid>/task/<id>``: what the
        proxy itself costs), once started."""
        return self._thread.native_id

    def start(self) -> ProxyThread:
        self._thread.start()
        if not self._started.wait(10) or self._error is not None:
            raise RuntimeError(f"the proxy did not start: {self._error!r}")
        return self

    def _main(self) -> None:
        async def main() -> None:
            self._token = trio.lowlevel.current_trio_token()
            with trio.CancelScope() as self._scope:
                async with trio.open_nursery() as nursery:
                    await nursery.start(self.proxy.run)
                    self._started.set()

        try:
            trio.run(main)
        except BaseException as exc:
            self._error = exc
            self._started.set()

    def _call(self, fn: Callable[[], T]) -> T:
        assert self._token is not None
        return trio.from_thread.run_sync(fn, trio_token=self._token)

    # Each change returns the counters as they stood when it took effect (see FaultyProxy.set_link).
    def cut(self) -> Stats:
        return self._call(lambda: self.proxy.set_link(LinkMode.CUT))

    def stall(self) -> Stats:
        return self._call(lambda: self.proxy.set_link(LinkMode.STALLED))

    def slow(self, rate: float) -> Stats:
        return self._call(lambda: self.proxy.set_link(LinkMode.UP, rate))

    def restore(self) -> Stats:
        return self._call(lambda: self.proxy.set_link(LinkMode.UP))

    def set_link(self, mode: LinkMode, rate: float | None = None, latency: float = 0.0, jitter: float = 0.0) -> Stats:
        """Any state at once: a far link (``latency`` seconds each way, plus up to ``jitter``),
        capped or not."""
        return self._call(lambda: self.proxy.set_link(mode, rate, latency, jitter))

    def stats(self) -> Stats:
        return self._call(self.proxy.snapshot)

    def stop(self) -> None:
        if self._token is not None and self._thread.is_alive():
            scope = self._scope
            if scope is not None:
                self._call(scope.cancel)
        self._thread.join(10)
        if self._error is not None:
            raise RuntimeError("the proxy failed") from self._error

    def __enter__(self) -> ProxyThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
