"""Link faults between the mirror and its source, through a fault-injecting proxy.

The first tests check the proxy itself: its rate cap on trio's MockClock over
memory streams, and its cut, stall and client selection over real sockets.
The last one puts it between a running mirror and a source cluster of two
brokers (which advertise the proxy's addresses, so every connection the
mirror makes goes through it) while a producer writes a steady zstd stream.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
import trio.testing
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.fixtures.brokers import BrokerProcess, Cluster, start_cluster
from tests.fixtures.mirror import MirrorProcess
from tests.fixtures.ports import free_ports
from tests.fixtures.prometheus import Scrape, poll, scrape
from tests.fixtures.zookeeper import ZooKeeperHandle
from tributary.client.errors import KafkaError

from .faulty_proxy import FaultyProxy, LinkMode, ProxyThread, client_id_of
from .helpers import assert_exact_copy, end_offsets, wait_for

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


# --- the mirror across a faulty link ------------------------------------------------------------

TOPIC = "clicks"
PARTITIONS = 4
#: A steady stream of about 1.3 MB/s of zstd batches (900 random bytes in base64 per record, which
#: zstd takes back to about 0.9 kB): more than the slowed link's 1 MB/s, so the
#: mirror falls behind while the link is slow, and a cut leaves a backlog worth catching up.
RATE = 1400  # records per second
CUT_SECONDS = 10.0
SLOW_SECONDS = 10.0
SLOW_RATE = 1_000_000  # bytes per second, each direction
MIRROR_CLIENT_PREFIX = "tributary-mirror-"


@dataclass
class SourceBehindProxy:
    brokers: list[BrokerProcess]
    proxy: ProxyThread

    @property
    def direct(self) -> str:
        """The brokers' own addresses (only bootstrap; their Metadata names the proxy)."""
        return ",".join(b.bootstrap for b in self.brokers)

    @property
    def via_proxy(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.proxy.ports)


@pytest.fixture
def source_behind_proxy(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[SourceBehindProxy]:
    """Two source brokers that advertise the proxy's ports: every connection a client makes
    after bootstrap goes through the proxy, whose faults hit the mirror's connections only."""
    root = tmp_path / "east"
    root.mkdir()
    ports = free_ports(2)
    proxy = ProxyThread(
        [("127.0.0.1", port) for port in ports],
        faulted=lambda client_id: client_id is not None and client_id.startswith(MIRROR_CLIENT_PREFIX),
    )
    with proxy:
        brokers = [
            BrokerProcess(
                i + 1,
                zookeeper.hosts + "/east",
                root / f"data-{i + 1}",
                root / f"broker-{i + 1}.log",
                {"num.partitions": str(PARTITIONS)},
                port=port,
                advertise=f"127.0.0.1:{proxy.ports[i]}",
            )
            for i, port in enumerate(ports)
        ]
        try:
            for broker in brokers:
                broker.start()
            for broker in brokers:
                broker.wait_ready(expected_brokers=len(brokers))
            yield SourceBehindProxy(brokers, proxy)
        finally:
            for broker in brokers:
                if broker.proc is not None and broker.proc.poll() is None:
                    broker.stop()


@pytest.fixture
def aggregate(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[Cluster]:
    (tmp_path / "agg").mkdir()
    yield from start_cluster(zookeeper.hosts + "/agg", tmp_path / "agg", 1)


class SteadyProducer:
    """confluent-kafka writing ``RATE`` zstd-compressed JSON records per second in a thread,
    keyed by sequence number, until stopped."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "client.id": "link-test-producer", "compression.type": "zstd",
            "linger.ms": 100, "enable.idempotence": True,
        })  # fmt: skip
        self.sent = 0
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="steady-producer", daemon=True)

    def _delivered(self, err: object, _msg: object) -> None:
        if err is not None:
            self.failed.append(str(err))

    def _run(self) -> None:
        start = time.monotonic()
        while not self._stop.is_set():
            due = start + self.sent / RATE
            if due > time.monotonic():
                self._stop.wait(due - time.monotonic())
                continue
            for _ in range(50):
                i = self.sent
                # Page views plus an opaque session blob: zstd halves the JSON, not the blob.
                value = json.dumps({
                    "seq": i, "page": f"/products/{i % 97}", "agent": "Mozilla/5.0",
                    "session": base64.b64encode(os.urandom(900)).decode(),
                })  # fmt: skip
                while True:
                    try:
                        self.producer.produce(TOPIC, key=str(i).encode(), value=value.encode(),
                                              on_delivery=self._delivered)  # fmt: skip
                        break
                    except BufferError:
                        self.producer.poll(0.05)
                self.sent += 1
            self.producer.poll(0)

    def start(self) -> None:
        self._thread.start()

    def halt(self) -> int:
        """Stop producing and wait for every record's answer; the records left unanswered."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30)
        left: int = self.producer.flush(60)
        return left

    def stop(self) -> int:
        assert self.halt() == 0, "records left unsent"
        assert not self.failed, f"{len(self.failed)} records failed, first: {self.failed[0]}"
        return self.sent


def _create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
        future.result(30)


def _lag_seconds(scraped: Scrape) -> float:
    return max(scraped.matching("tributary_mirror_lag_seconds", source="east").values(), default=0.0)


def _link_up(scraped: Scrape) -> float:
    return scraped.get("tributary_mirror_link_up", -1.0, source="east", side="source")


def _total_end(bootstrap: str, topic: str) -> int:
    try:
        return sum(end_offsets(bootstrap, topic).values())
    except KafkaError:
        return 0


def test_mirror_rides_out_a_cut_and_a_slow_link(
    source_behind_proxy: SourceBehindProxy, aggregate: Cluster, tmp_path: Path
) -> None:
    source, proxy = source_behind_proxy, source_behind_proxy.proxy
    _create_topic(source.direct)
    producer = SteadyProducer(source.direct)
    mirror = MirrorProcess(source.via_proxy, "east", aggregate.bootstrap, tmp_path / "mirror.log")
    copy = f"east.{TOPIC}"
    producer.start()
    mirror.start()
    pid = mirror.proc.pid if mirror.proc is not None else None
    try:
        # Steady state: the mirror copies through the proxy.
        wait_for(lambda: _total_end(aggregate.bootstrap, copy) > 5 * RATE, 60, "the first copies", mirror.log_tail)
        # Caught up (no fetched-ahead backlog left to copy while cut off), the link up.
        poll(mirror.metrics_port, lambda s: s.total("tributary_mirror_lag_records") < RATE and _link_up(s) == 1,
             "the mirror to keep up with the stream", timeout=60)  # fmt: skip

        # Cut: the mirror's connections are reset and refused for 10 s; the producer goes on.
        proxy.cut()
        cut_at = time.monotonic()
        seen_down = False
        outage_lag = outage_since_copy = 0.0
        settled_end: int | None = None
        while time.monotonic() < cut_at + CUT_SECONDS:
            scraped = scrape(mirror.metrics_port)
            seen_down = seen_down or _link_up(scraped) == 0
            outage_lag = max(outage_lag, _lag_seconds(scraped))
            outage_since_copy = max(outage_since_copy, scraped.value("tributary_mirror_seconds_since_last_copy",
                                                                     source="east"))  # fmt: skip
            if settled_end is None and time.monotonic() > cut_at + 3:
                # Whatever was fetched before the cut has been written by now.
                settled_end = _total_end(aggregate.bootstrap, copy)
            time.sleep(0.25)
        during_cut_end = _total_end(aggregate.bootstrap, copy)
        assert seen_down, "tributary_mirror_link_up{side=source} never went to 0 during the cut"
        assert settled_end == during_cut_end, "the aggregate grew while the mirror was cut off its source"
        assert outage_lag >= CUT_SECONDS - 4, f"the lag reached only {outage_lag:.1f} s during a 10 s cut"
        assert outage_since_copy >= CUT_SECONDS - 4
        assert proxy.stats().reset > 0 and proxy.stats().refused > 0

        # Restore: the mirror resumes by itself.
        proxy.restore()
        restored_at = time.monotonic()
        wait_for(lambda: _total_end(aggregate.bootstrap, copy) > during_cut_end, 60,
                 "copies after the link came back", mirror.log_tail)  # fmt: skip
        resumed_after = time.monotonic() - restored_at
        poll(mirror.metrics_port, lambda s: _link_up(s) == 1, "the source link to be up again")

        # Slow: 1 MB/s each way, less than the stream needs.
        before = proxy.stats()
        copied_before = scrape(mirror.metrics_port).total("tributary_mirror_copied_bytes_total")
        proxy.slow(SLOW_RATE)
        slow_at = time.monotonic()
        time.sleep(SLOW_SECONDS)
        # Copying goes on across the slow link (not stalled on timeouts). Fetches of several MiB
        # take seconds each at 1 MB/s and a rejoin may be under way, so progress is awaited, not timed.
        poll(mirror.metrics_port,
             lambda s: s.total("tributary_mirror_copied_bytes_total") - copied_before >= 2 * SLOW_RATE,
             "copies across the slow link", timeout=60)  # fmt: skip
        after = proxy.stats()  # before the restore, which lets the bytes waiting for the link rush through
        slow_seconds = time.monotonic() - slow_at
        proxy.restore()
        through = after.faulted_bytes_down - before.faulted_bytes_down
        assert through <= SLOW_RATE * (slow_seconds + 0.5), f"{through} bytes in {slow_seconds:.1f} s"
        # The mirror kept the link busy: at least half its capacity was used.
        assert through >= SLOW_RATE * slow_seconds * 0.5, f"only {through} bytes in {slow_seconds:.1f} s"

        # Restored: stop the stream and let the mirror catch up.
        time.sleep(3)
        produced = producer.stop()
        source_end = end_offsets(source.direct, TOPIC)
        assert sum(source_end.values()) == produced
        wait_for(lambda: end_offsets(aggregate.bootstrap, copy) == source_end, 120,
                 "the aggregate to hold everything", mirror.log_tail)  # fmt: skip
        poll(mirror.metrics_port, lambda s: s.total("tributary_mirror_lag_records") == 0 and _lag_seconds(s) == 0,
             "the lag to go back to 0")  # fmt: skip
        assert mirror.proc is not None and mirror.proc.pid == pid and mirror.running(), "the mirror was restarted"
        assert mirror.stop() == 0
    finally:
        if mirror.running():
            mirror.kill()
        producer.halt()
    log = (tmp_path / "mirror.log").read_text()
    assert "event=link_down side=source" in log
    assert log.index("event=link_up side=source", log.index("event=link_down side=source")) > 0
    assert assert_exact_copy(source.direct, aggregate.bootstrap, "east", TOPIC) == produced
    print(
        f"cut {CUT_SECONDS:.0f} s: lag reached {outage_lag:.1f} s; copying resumed {resumed_after:.1f} s after "
        f"the restore; slow link: {through / slow_seconds / 1e6:.2f} MB/s through the proxy; {produced} records"
    )
