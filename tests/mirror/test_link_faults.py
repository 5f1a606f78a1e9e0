"""Link faults between the mirror and its source, through a fault-injecting proxy.

The first tests check the proxy itself: its rate cap on trio's MockClock over
memory streams, and its cut, stall and client selection over real sockets.
The last one puts it between a running mirror and a source cluster of two
brokers (which advertise the proxy's addresses, so every connection the
mirror makes goes through it) while a producer writes a steady zstd stream.
"""

from __future__ import annotations

import struct

import pytest
import trio
import trio.testing

from .faulty_proxy import FaultyProxy, LinkMode, client_id_of

# --- the proxy's rate cap, on virtual time ------------------------------------------------------


async def _push(send: trio.abc.SendStream, total: int, chunk: int = 10_000) -> None:
    for _ in range(total // chunk):
        await send.send_all(b"x" * chunk)
    await send.aclose()


async def _drain(receive: trio.abc.ReceiveStream) -> int:
    got = 0
    while data := await receive.receive_some(1 << 20):
        got += len(data)
    return got


async def _timed_pumps(proxy: FaultyProxy, loads: list[tuple[str, int]]) -> tuple[float, list[int]]:
    """Push ``size`` bytes in ``direction`` through one faulted pump per load, concurrently;
    the virtual seconds until every byte arrived, and the bytes each receiver got."""
    received = [0] * len(loads)
    start = trio.current_time()

    async def one(i: int, direction: str, size: int) -> None:
        src_send, src_receive = trio.testing.memory_stream_one_way_pair()
        dst_send, dst_receive = trio.testing.memory_stream_one_way_pair()

        async def drain() -> None:
            received[i] = await _drain(dst_receive)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(_push, src_send, size)
            nursery.start_soon(drain)
            with trio.CancelScope() as scope:
                await proxy.pump(src_receive, dst_send, direction, True, scope)
            await dst_send.aclose()

    async with trio.open_nursery() as nursery:
        for i, (direction, size) in enumerate(loads):
            nursery.start_soon(one, i, direction, size)
    return trio.current_time() - start, received


async def test_slow_link_caps_a_direction(autojump_clock: trio.testing.MockClock) -> None:
    proxy = FaultyProxy([])
    proxy.set_link(LinkMode.UP, rate=100_000)
    elapsed, received = await _timed_pumps(proxy, [("down", 1_000_000)])
    assert received == [1_000_000]
    # 1 MB at 100 kB/s, less the bucket's 5 kB burst: 9.95 s, give or take the last chunk.
    assert 9.9 <= elapsed <= 10.0


async def test_slow_link_is_shared_by_connections_but_not_directions(autojump_clock: trio.testing.MockClock) -> None:
    proxy = FaultyProxy([])
    proxy.set_link(LinkMode.UP, rate=100_000)
    # Two connections downstream share one cap (the link), upstream has a cap of its own.
    elapsed, received = await _timed_pumps(proxy, [("down", 500_000), ("down", 500_000), ("up", 1_000_000)])
    assert received == [500_000, 500_000, 1_000_000]
    assert 9.9 <= elapsed <= 10.05


async def test_restore_lifts_the_cap_at_once(autojump_clock: trio.testing.MockClock) -> None:
    proxy = FaultyProxy([])
    proxy.set_link(LinkMode.UP, rate=10_000)

    async def restore_later() -> None:
        await trio.sleep(2)
        proxy.set_link(LinkMode.UP)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(restore_later)
        elapsed, received = await _timed_pumps(proxy, [("down", 1_000_000)])
    # Capped, it would take 100 s; the waiter wakes on the restore instead of serving its debt.
    assert received == [1_000_000]
    assert 2.0 <= elapsed < 2.1


async def test_stalled_link_holds_bytes_until_restored(autojump_clock: trio.testing.MockClock) -> None:
    proxy = FaultyProxy([])
    proxy.set_link(LinkMode.STALLED)
    src_send, src_receive = trio.testing.memory_stream_one_way_pair()
    dst_send, dst_receive = trio.testing.memory_stream_one_way_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(proxy.pump, src_receive, dst_send, "up", True, nursery.cancel_scope)
        await src_send.send_all(b"request")
        with trio.move_on_after(100):
            await dst_receive.receive_some(100)
            pytest.fail("bytes crossed a stalled link")
        proxy.set_link(LinkMode.UP)
        assert await dst_receive.receive_some(100) == b"request"
        nursery.cancel_scope.cancel()


# --- the proxy over real sockets: selection, cut, stall -----------------------------------------


def _request(client_id: str, body: bytes = b"") -> bytes:
    """A Kafka-like request frame: enough header for the proxy to read the client id."""
    encoded = client_id.encode()
    rest = struct.pack(">hhih", 18, 3, 1, len(encoded)) + encoded + body
    return struct.pack(">i", len(rest)) + rest


def test_client_id_of_reads_the_request_header() -> None:
    frame = _request("tributary-mirror-east-source", b"body")
    assert client_id_of(frame) == (True, "tributary-mirror-east-source")
    assert client_id_of(frame[:20]) == (False, None)
    assert client_id_of(struct.pack(">ihhih", 10, 18, 3, 1, -1)) == (True, None)


async def _echo_server(nursery: trio.Nursery) -> int:
    async def echo(stream: trio.SocketStream) -> None:
        try:
            while data := await stream.receive_some(65536):
                await stream.send_all(data)
        except trio.BrokenResourceError:
            pass

    listeners = await nursery.start(trio.serve_tcp, echo, 0)
    port: int = listeners[0].socket.getsockname()[1]
    return port


async def _round_trip(stream: trio.SocketStream, data: bytes) -> bytes:
    """Send ``data``; what comes back (b"" once the proxy closed or reset the connection)."""
    try:
        await stream.send_all(data)
        got = b""
        while len(got) < len(data):
            chunk = await stream.receive_some(65536)
            if not chunk:
                break
            got += chunk
    except trio.BrokenResourceError:
        return b""
    return got


async def test_cut_resets_faulted_connections_and_refuses_new_ones() -> None:
    async with trio.open_nursery() as nursery:
        port = await _echo_server(nursery)
        proxy = FaultyProxy([("127.0.0.1", port)], faulted=lambda client_id: client_id == "mirror")
        (proxy_port,) = await nursery.start(proxy.run)
        mirror = await trio.open_tcp_stream("127.0.0.1", proxy_port)
        producer = await trio.open_tcp_stream("127.0.0.1", proxy_port)
        first_mirror, first_producer = _request("mirror", b"1"), _request("producer", b"1")
        assert await _round_trip(mirror, first_mirror) == first_mirror
        assert await _round_trip(producer, first_producer) == first_producer

        proxy.set_link(LinkMode.CUT)
        with trio.fail_after(5):
            assert await _round_trip(mirror, b"more") == b""
            assert await _round_trip(producer, b"more") == b"more"  # not faulted: untouched
            refused = await trio.open_tcp_stream("127.0.0.1", proxy_port)
            assert await _round_trip(refused, _request("mirror")) == b""
            other = await trio.open_tcp_stream("127.0.0.1", proxy_port)
            assert await _round_trip(other, _request("loader")) == _request("loader")
        assert (proxy.stats.reset, proxy.stats.refused) == (1, 1)

        proxy.set_link(LinkMode.UP)
        with trio.fail_after(5):
            again = await trio.open_tcp_stream("127.0.0.1", proxy_port)
            assert await _round_trip(again, _request("mirror", b"2")) == _request("mirror", b"2")
        for stream in (mirror, producer, refused, other, again):
            await stream.aclose()
        nursery.cancel_scope.cancel()


async def test_stall_delays_faulted_connections_without_closing_them() -> None:
    async with trio.open_nursery() as nursery:
        port = await _echo_server(nursery)
        proxy = FaultyProxy([("127.0.0.1", port)])
        (proxy_port,) = await nursery.start(proxy.run)
        stream = await trio.open_tcp_stream("127.0.0.1", proxy_port)
        hello = _request("mirror")
        assert await _round_trip(stream, hello) == hello
        proxy.set_link(LinkMode.STALLED)
        await stream.send_all(b"waiting")
        with trio.move_on_after(0.5) as waited:
            await stream.receive_some(100)
        assert waited.cancelled_caught, "bytes crossed a stalled link"
        fresh = await trio.open_tcp_stream("127.0.0.1", proxy_port)
        await fresh.send_all(hello)
        proxy.set_link(LinkMode.UP)
        with trio.fail_after(5):
            got = b""
            while len(got) < len(b"waiting"):
                got += await stream.receive_some(100)
            assert got == b"waiting"
            got = b""
            while len(got) < len(hello):
                got += await fresh.receive_some(100)
            assert got == hello  # the connection made during the stall went through afterwards
        assert proxy.stats.reset == 0
        await stream.aclose()
        await fresh.aclose()
        nursery.cancel_scope.cancel()
