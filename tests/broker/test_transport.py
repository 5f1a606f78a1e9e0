"""Responses with file regions reach the peer byte for byte, by sendfile or by fallback."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import trio
import trio.testing

from tributary.broker.transport import receive_some, send_now, send_parts


@dataclass
class Region:
    fd: int
    position: int
    size: int


@dataclass
class Records:
    regions: list[Region]

    def __len__(self) -> int:
        return sum(r.size for r in self.regions)


def _file(tmp_path: Path, data: bytes) -> int:
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    return os.open(path, os.O_RDONLY)


async def test_fallback_path_over_memory_stream(tmp_path: Path) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    fd = _file(tmp_path, data)
    try:
        send, receive = trio.testing.memory_stream_pair()
        parts = [b"head", Records([Region(fd, 5, 2_000_000), Region(fd, 2_500_000, 600_000)]), b"tail"]
        expected = b"head" + data[5:2_000_005] + data[2_500_000:3_100_000] + b"tail"
        received = bytearray()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(send_parts, send, parts)
            while len(received) < len(expected):
                received += await receive.receive_some()
        assert bytes(received) == expected
    finally:
        os.close(fd)


async def test_sendfile_path_over_tcp(tmp_path: Path) -> None:
    data = os.urandom(8 * 1024 * 1024)
    fd = _file(tmp_path, data)
    try:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        received = bytearray()
        expected = b"x" + data[100:] + b"y"

        async with trio.open_nursery() as nursery:

            async def serve() -> None:
                server_stream = await listeners[0].accept()
                async with server_stream:
                    assert isinstance(server_stream, trio.SocketStream)
                    await send_parts(server_stream, [b"x", Records([Region(fd, 100, len(data) - 100)]), b"y"])

            nursery.start_soon(serve)
            client = await trio.open_tcp_stream("127.0.0.1", port)
            async with client:
                while len(received) < len(expected):
                    chunk = await client.receive_some()
                    assert chunk
                    received += chunk
        await listeners[0].aclose()
        assert bytes(received) == expected
    finally:
        os.close(fd)


async def test_send_now_writes_what_the_socket_takes_and_receive_some_reads_it_in_order() -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    client = await trio.open_tcp_stream("127.0.0.1", port)
    server = await listeners[0].accept()
    data = os.urandom(64 * 1024 * 1024)  # more than loopback buffers hold while nobody reads
    async with client, server:
        sent = send_now(server, data)
        assert sent is not None and sent > 0
        while taken := send_now(server, memoryview(data)[sent:]):  # until the buffers are full
            sent += taken
        assert sent < len(data)  # full: nothing more taken, and nothing waited for
        received = bytearray()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.send_all, memoryview(data)[sent:])
            while len(received) < len(data):
                chunk = await receive_some(client, 1 << 20)
                assert chunk
                received += chunk
        assert bytes(received) == data
        await server.aclose()
        assert await receive_some(client, 1024) == b""  # the peer closed
    await listeners[0].aclose()


async def test_send_now_leaves_other_streams_to_send_all() -> None:
    send, receive = trio.testing.memory_stream_pair()
    assert send_now(send, b"x") is None
    await send.send_all(b"y")
    assert await receive_some(receive, 10) == b"y"
