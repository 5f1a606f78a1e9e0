"""tributary.testing's fault proxy: rate cap, latency and stall on trio's MockClock over memory
streams; client selection, cut and stall over real sockets."""

from __future__ import annotations

import random
import statistics
import struct

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.testing.fault_proxy import BURST_FRACTION, MAX_CHUNK, Delay, FaultyProxy, LinkMode, client_id_of

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


async def _paced_push(send: trio.abc.SendStream, total: int, chunk: int, interval: float) -> None:
    for _ in range(total // chunk):
        await send.send_all(b"x" * chunk)
        await trio.sleep(interval)
    await send.aclose()


async def test_a_cap_set_mid_stream_is_measured_from_the_step_that_set_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A stream at 2 MB/s, uncapped for 1 s, capped at 100 kB/s for 2 s, then restored: the
    # counters returned by each change bound the capped window exactly, however busy the
    # caller was around it (the flake in the mirror test came from a window that began early).
    proxy = FaultyProxy([])
    src_send, src_receive = trio.testing.memory_stream_one_way_pair()
    dst_send, dst_receive = trio.testing.memory_stream_one_way_pair()
    snapshots = []

    async def change_link() -> None:
        await trio.sleep(1)
        snapshots.append(proxy.set_link(LinkMode.UP, rate=100_000))
        await trio.sleep(2)
        snapshots.append(proxy.set_link(LinkMode.UP))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(_paced_push, src_send, 8_000_000, 20_000, 0.01)
        nursery.start_soon(_drain, dst_receive)
        nursery.start_soon(change_link)
        await proxy.pump(src_receive, dst_send, "down", True, trio.CancelScope())
        await dst_send.aclose()
    before, after = snapshots
    assert after.at - before.at == pytest.approx(2.0)
    assert 1_900_000 <= before.faulted_bytes_down <= 2_020_000  # the uncapped second
    through = after.faulted_bytes_down - before.faulted_bytes_down
    assert 2 * 100_000 * 0.9 <= through <= 100_000 * (2 + BURST_FRACTION) + MAX_CHUNK
    assert proxy.stats.faulted_bytes_down == 8_000_000


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


# --- latency ---------------------------------------------------------------------------------


async def test_latency_delays_each_chunk_by_itself_not_by_the_chunks_before_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    proxy = FaultyProxy([])
    proxy.set_link(LinkMode.UP, latency=0.2)
    src_send, src_receive = trio.testing.memory_stream_one_way_pair()
    dst_send, dst_receive = trio.testing.memory_stream_one_way_pair()
    arrivals: list[tuple[float, int]] = []
    start = trio.current_time()

    async def receive() -> None:
        while data := await dst_receive.receive_some(1 << 20):
            arrivals.append((trio.current_time() - start, len(data)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(_paced_push, src_send, 100_000, 10_000, 0.05)  # ten chunks, 50 ms apart
        nursery.start_soon(receive)
        await proxy.pump(src_receive, dst_send, "down", True, trio.CancelScope())
        await dst_send.aclose()
    # Chunk i left at 50 ms * i and arrives 200 ms later: the pipe stays full.
    assert [round(t, 3) for t, _ in arrivals] == [round(0.05 * i + 0.2, 3) for i in range(10)]
    assert sum(n for _, n in arrivals) == 100_000


async def test_latency_and_a_rate_cap_combine(autojump_clock: trio.testing.MockClock) -> None:
    proxy = FaultyProxy([])
    proxy.set_link(LinkMode.UP, rate=100_000, latency=0.5)
    elapsed, received = await _timed_pumps(proxy, [("down", 1_000_000)])
    assert received == [1_000_000]
    # 9.95 s at the cap (as in test_slow_link_caps_a_direction), then the last chunk's 0.5 s.
    assert 10.4 <= elapsed <= 10.5


async def test_unfaulted_connections_never_wait_for_latency(autojump_clock: trio.testing.MockClock) -> None:
    proxy = FaultyProxy([])
    proxy.set_link(LinkMode.UP, latency=5.0)
    src_send, src_receive = trio.testing.memory_stream_one_way_pair()
    dst_send, dst_receive = trio.testing.memory_stream_one_way_pair()
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_push, src_send, 100_000)
        nursery.start_soon(_drain, dst_receive)
        await proxy.pump(src_receive, dst_send, "down", False, trio.CancelScope())
        await dst_send.aclose()
    assert trio.current_time() == start


async def test_a_negative_latency_is_refused() -> None:
    with pytest.raises(ValueError, match="latency"):
        FaultyProxy([]).set_link(LinkMode.UP, latency=-1)
    with pytest.raises(ValueError, match="jitter"):
        FaultyProxy([]).set_link(LinkMode.UP, latency=0.1, jitter=-0.01)


# --- jitter ----------------------------------------------------------------------------------


async def _jittered_arrivals(seed: int, latency: float, jitter: float) -> list[tuple[float, bytes]]:
    """200 numbered chunks pushed 10 ms apart through a jittered link: (delay, chunk) each."""
    proxy = FaultyProxy([], seed=seed)
    proxy.set_link(LinkMode.UP, latency=latency, jitter=jitter)
    src_send, src_receive = trio.testing.memory_stream_one_way_pair()
    dst_send, dst_receive = trio.testing.memory_stream_one_way_pair()
    start = trio.current_time()
    arrivals: list[tuple[float, bytes]] = []

    async def push() -> None:
        for i in range(200):
            await src_send.send_all(b"%08d" % i)
            await trio.sleep(0.01)
        await src_send.aclose()

    async def receive() -> None:
        while data := await dst_receive.receive_some(1 << 20):
            arrivals.append((trio.current_time() - start, bytes(data)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(push)
        nursery.start_soon(receive)
        await proxy.pump(src_receive, dst_send, "down", True, trio.CancelScope())
        await dst_send.aclose()
    # Each chunk was sent at 10 ms * its number: its delay is its arrival less that.
    return [(at - 0.01 * int(data[:8]), data) for at, data in arrivals]


async def test_jitter_spreads_each_chunks_delay_within_its_bound_and_keeps_the_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    arrivals = await _jittered_arrivals(seed=7, latency=0.1, jitter=0.05)
    assert b"".join(data for _, data in arrivals) == b"".join(b"%08d" % i for i in range(200)), "in order"
    delays = [delay for delay, _ in arrivals]
    assert min(delays) >= 0.1 - 1e-9
    assert max(delays) <= 0.15 + 1e-9
    # Spread, not fixed: about latency + jitter / 2 on average (a chunk held behind a later
    # drawn one arrives with it, which only lengthens the short delays a little).
    assert 0.12 <= statistics.fmean(delays) <= 0.14
    assert statistics.pstdev(delays) > 0.01


async def test_the_same_seed_gives_the_same_delays(autojump_clock: trio.testing.MockClock) -> None:
    first = await _jittered_arrivals(seed=3, latency=0.05, jitter=0.02)
    again = await _jittered_arrivals(seed=3, latency=0.05, jitter=0.02)
    other = await _jittered_arrivals(seed=4, latency=0.05, jitter=0.02)
    assert [round(d, 6) for d, _ in first] == [round(d, 6) for d, _ in again]
    assert [round(d, 6) for d, _ in first] != [round(d, 6) for d, _ in other]


async def test_without_jitter_the_latency_is_fixed(autojump_clock: trio.testing.MockClock) -> None:
    delays = [round(d, 9) for d, _ in await _jittered_arrivals(seed=1, latency=0.1, jitter=0.0)]
    assert set(delays) == {0.1}


@settings(max_examples=50)
@given(
    steps=st.lists(st.tuples(st.floats(0, 1), st.floats(0, 0.5), st.floats(0, 0.5)), min_size=1, max_size=50),
    seed=st.integers(0, 2**32),
)
def test_delays_never_reorder_and_stay_within_latency_and_jitter(
    steps: list[tuple[float, float, float]], seed: int
) -> None:
    delay = Delay(random.Random(seed))
    now = previous = 0.0
    for gap, latency, jitter in steps:
        now += gap
        due = delay.due(now, latency, jitter)
        assert due >= previous, "a chunk overtook the one before it"
        assert due >= now + latency
        assert due <= max(previous, now + latency + jitter)
        previous = due
