"""Sending a response: byte strings, and file regions straight from the page cache.

A fetch response's records are file regions of log segments. On a plain TCP
socket they go out with ``os.sendfile`` (no copy through Python); on any other
stream (TLS, memory streams in tests) they are read and sent, so the connection
loop does not care which stream it has.

Over TLS the bytes must pass through user space to be encrypted (trio's
SSLStream encrypts into a memory BIO; kernel TLS cannot reach it), so the
fallback makes the fewest copies Python allows: ``os.preadv`` reads each chunk
straight into a reused buffer (no new bytes object per chunk), and a memoryview
of it goes to ``send_all``, which encrypts from it. The buffers come from a
small free list shared by every connection: a fetch holds one only while it
sends. Measured, this saves no CPU worth the name against a new bytes object
per chunk (the encryption and trio's copy out of its BIO are the cost, ten
times sendfile's per GB); it keeps the heap from churning. docs/benchmarks.md
has the figures.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sized
from typing import Protocol

import trio

# Bytes per read on the fallback path: large enough to amortise the syscalls (64 KiB cost a
# third more CPU per GB over TLS than 256 KiB), small enough that a TLS fetch in flight holds
# little: trio's SSLStream copies each encrypted chunk out of its memory BIO into a new bytes
# object of about this size. 256 KiB and 1 MiB measured alike (bench/bench_tls.py, "send").
FALLBACK_CHUNK = 256 * 1024
# Free buffers kept for the fallback path (more in use at once are made and dropped).
_POOL_SIZE = 8
_pool: list[bytearray] = []


def _take_buffer() -> bytearray:
    return _pool.pop() if _pool else bytearray(FALLBACK_CHUNK)


def _give_back(buffer: bytearray) -> None:
    if len(_pool) < _POOL_SIZE:
        _pool.append(buffer)


class FileRegion(Protocol):
    fd: int
    position: int
    size: int


class Regions(Sized, Protocol):
    """A spliced records value: the file regions to send, in order."""

    @property
    def regions(self) -> Iterable[FileRegion]: ...


def _no_progress() -> None:
    pass


async def send_parts(
    stream: trio.abc.SendStream,
    parts: list[bytes | Sized],
    *,
    sendfile: bool = True,
    progress: Callable[[], None] = _no_progress,
) -> None:
    """Send ``parts`` in order; consecutive byte strings go out in one write.

    ``progress`` is called whenever some bytes have gone out (after each write,
    each sendfile call, each chunk of the fallback): a large response to a slow
    reader is activity all along, not one silent stretch (see broker.idle)."""
    pending = bytearray()
    for part in parts:
        if isinstance(part, bytes | bytearray | memoryview):
            pending += part
            continue
        regions = list(part.regions)  # type: ignore[attr-defined]
        if not regions:
            continue
        if pending:
            await stream.send_all(pending)
            progress()
            pending = bytearray()
        for region in regions:
            await send_region(stream, region, sendfile=sendfile, progress=progress)
    if pending:
        await stream.send_all(pending)
        progress()


async def receive_some(stream: trio.abc.ReceiveStream, max_bytes: int) -> bytes | bytearray:
    """``stream.receive_some``; from a plain TCP socket with bytes waiting, without trio's trip
    through the scheduler that comes with every socket call: a client pipelining small requests
    wakes the reader once per burst, not once per receive plus once per wait. It waits (and is
    cancelled) only when there is nothing to read."""
    if type(stream) is not trio.SocketStream:
        return await stream.receive_some(max_bytes)
    sock = stream.socket
    while True:
        try:
            return os.read(sock.fileno(), max_bytes)
        except BlockingIOError:
            await trio.lowlevel.wait_readable(sock)
        except OSError as exc:
            raise trio.BrokenResourceError(f"receiving: {exc}") from exc


def send_now(stream: trio.abc.SendStream, data: bytes | memoryview) -> int | None:
    """Write what a plain TCP socket takes of ``data`` right now, without waiting and without a
    trip through the scheduler: how many bytes that was (0 when its buffer is full), or None for
    any other stream (TLS, memory), which only ``send_all`` writes to. The caller makes sure no
    other send is under way on the stream."""
    if type(stream) is not trio.SocketStream:
        return None
    try:
        return os.write(stream.socket.fileno(), data)
    except BlockingIOError:
        return 0
    except OSError as exc:
        raise trio.BrokenResourceError(f"sending: {exc}") from exc


async def send_region(
    stream: trio.abc.SendStream,
    region: FileRegion,
    *,
    sendfile: bool = True,
    progress: Callable[[], None] = _no_progress,
) -> None:
    if sendfile and isinstance(stream, trio.SocketStream):
        await _sendfile(stream, region, progress)
    else:
        await _read_and_send(stream, region, progress)


async def _sendfile(stream: trio.SocketStream, region: FileRegion, progress: Callable[[], None]) -> None:
    # Try first and wait only when the socket buffer is full: waiting up front
    # costs epoll registrations on every response for nothing.
    sock = stream.socket
    offset, remaining = region.position, region.size
    waited = False
    while remaining:
        try:
            sent = os.sendfile(sock.fileno(), region.fd, offset, remaining)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            waited = True
            continue
        if sent == 0:
            raise trio.BrokenResourceError(f"segment ended {remaining} bytes early at position {offset}")
        offset += sent
        remaining -= sent
        progress()
    if not waited:
        await trio.lowlevel.checkpoint()  # a trio send is a checkpoint even when the kernel took it all


async def _read_and_send(stream: trio.abc.SendStream, region: FileRegion, progress: Callable[[], None]) -> None:
    offset, remaining = region.position, region.size
    buffer = _take_buffer()
    view = memoryview(buffer)
    try:
        while remaining:
            read = os.preadv(region.fd, [view[: min(remaining, FALLBACK_CHUNK)]], offset)
            if not read:
                raise trio.BrokenResourceError(f"segment ended {remaining} bytes early at position {offset}")
            # send_all has consumed (encrypted, or copied) the bytes when it returns: the
            # buffer is free for the next chunk.
            await stream.send_all(view[:read])
            progress()
            offset += read
            remaining -= read
    finally:
        view.release()
        _give_back(buffer)
