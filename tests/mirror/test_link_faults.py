"""Link faults between the mirror and its source, through tributary.testing's fault proxy.

The proxy stands between a running mirror and a source cluster of two brokers (which advertise
the proxy's addresses, so every connection the mirror makes goes through it) while a producer
writes a steady zstd stream. The proxy's own tests are in tests/testing/test_fault_proxy.py.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.fixtures.mirror import MirrorProcess
from tests.fixtures.prometheus import Scrape, poll, scrape
from tests.fixtures.zookeeper import ZooKeeperHandle
from tributary.client.errors import KafkaError
from tributary.testing.cluster import BrokerProcess, Cluster, start_cluster
from tributary.testing.fault_proxy import BURST_FRACTION, MAX_CHUNK, ProxyThread
from tributary.testing.ports import free_ports

from .helpers import assert_exact_copy, end_offsets, wait_for

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

        # Slow: 1 MB/s each way, less than the stream needs. The window is measured on the proxy's
        # clock, between the counters taken in the very step that set the cap and the one that
        # lifted it: the catch-up after the cut runs at full speed right up to the cap, and a
        # snapshot taken before it (or after the restore lets waiting bytes rush through) counts
        # uncapped bytes as if they had crossed the slow link.
        before = proxy.slow(SLOW_RATE)
        copied_before = scrape(mirror.metrics_port).total("tributary_mirror_copied_bytes_total")
        time.sleep(SLOW_SECONDS)
        # Copying goes on across the slow link (not stalled on timeouts). Fetches of several MiB
        # take seconds each at 1 MB/s and a rejoin may be under way, so progress is awaited, not timed.
        poll(mirror.metrics_port,
             lambda s: s.total("tributary_mirror_copied_bytes_total") - copied_before >= 2 * SLOW_RATE,
             "copies across the slow link", timeout=60)  # fmt: skip
        after = proxy.restore()
        slow_seconds = after.at - before.at
        through = after.faulted_bytes_down - before.faulted_bytes_down
        # The cap admits its burst plus the rate; a chunk per open connection may have passed
        # the link just before the cap and reached the client just after.
        in_flight = max(before.faulted_open, after.faulted_open) * MAX_CHUNK
        assert through <= SLOW_RATE * (slow_seconds + BURST_FRACTION) + in_flight, (
            f"{through} bytes in {slow_seconds:.1f} s"
        )
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
