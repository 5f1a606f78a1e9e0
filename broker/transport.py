"""Sending a response: byte strings, and file regions straight from the page cache.

A fetch response's records are file regions of log segments. On a plain TCP
socket they go out with ``os.sendfile`` (no copy through Python); on any other
stream (TLS later, memory streams in tests) they are read with ``os.pread``
and sent, so the connection loop does not care which stream it has.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sized
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


async def send_parts(stream: trio.abc.SendStream, parts: list[bytes | Sized], *, sendfile: bool = True) -> None:
    for part in parts:
        if isinstance(part, bytes | bytearray | memoryview):
            await stream.send_all(part)
        else:
            for region in part.regions:  # type: ignore[attr-defined]
                await send_region(stream, region, sendfile=sendfile)


async def send_region(stream: trio.abc.SendStream, region: FileRegion, *, sendfile: bool = True) -> None:
    if sendfile and isinstance(stream, trio.SocketStream):
        await _sendfile(stream, region)
    else:
        await _read_and_send(stream, region)


async def _sendfile(stream: trio.SocketStream, region: FileRegion) -> None:
    sock = stream.socket
    offset, remaining = region.position, region.size
    while remaining:
        await trio.lowlevel.wait_writable(sock)
        try:
            sent = os.sendfile(sock.fileno(), region.fd, offset, remaining)
        except BlockingIOError:
            continue
        if sent == 0:
            raise trio.BrokenResourceError(f"segment ended {remaining} bytes early at position {offset}")
        offset += sent
        remaining -= sent


async def _read_and_send(stream: trio.abc.SendStream, region: FileRegion) -> None:
    offset, remaining = region.position, region.size
    while remaining:
        chunk = os.pread(region.fd, min(remaining, FALLBACK_CHUNK), offset)
        if not chunk:
            raise trio.BrokenResourceError(f"segment ended {remaining} bytes early at position {offset}")
        await stream.send_all(chunk)
        offset += len(chunk)
        remaining -= len(chunk)
