"""Sending a response: byte strings, and file regions straight from the page cache.

A fetch response's records are file regions of log segments. On a plain TCP
socket they go out with ``os.sendfile`` (no copy through Python); on any other
stream (TLS later, memory streams in tests) they are read with ``os.pread``
and sent, so the connection loop does not care which stream it has.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sized
from typing import Protocol

import trio

# Bytes per pread on the fallback path: large enough to amortise the syscalls,
# small enough not to bloat the heap with one huge fetch.
FALLBACK_CHUNK = 1024 * 1024


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
    while remaining:
        chunk = os.pread(region.fd, min(remaining, FALLBACK_CHUNK), offset)
        if not chunk:
            raise trio.BrokenResourceError(f"segment ended {remaining} bytes early at position {offset}")
        await stream.send_all(chunk)
        progress()
        offset += len(chunk)
        remaining -= len(chunk)
