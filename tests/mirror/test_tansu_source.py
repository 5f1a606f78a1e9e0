"""Mirroring from a foreign broker: Tansu (tests/fixtures/tansu.py) as the source, our
broker as the aggregate. The aggregate must hold Tansu's batches with byte-identical
compressed records, in order, each once.

Tansu's ListOffsets "latest" is not trusted (FIELD-NOTES.md): the source side is read
until a fetch brings nothing new. Its fetches leave a partition out of the answer when
asked not to wait, so every read here waits a little.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.fixtures.mirror import MirrorProcess
from tests.fixtures.tansu import TansuBroker, tansu
from tributary.client.blocking import BlockingFetcher
from tributary.protocol.records import HEADER_SIZE, Compression
from tributary.testing.cluster import Cluster

from .helpers import Batch, read_batches, records_of, wait_for

__all__ = ["tansu"]  # the session fixture, used by name below

ALIAS = "tansu"
PARTITIONS = 2


def read_until_idle(bootstrap: str, topic: str, partitions: int) -> dict[int, list[Batch]]:
    """Every batch of every partition, fetched until a fetch (waiting 200 ms) brings nothing."""
    out: dict[int, list[Batch]] = {}
    with BlockingFetcher(bootstrap) as fetcher:
        for partition in range(partitions):
            batches: list[Batch] = []
            offset = 0
            while True:
                fetched = fetcher.fetch(topic, partition, offset, max_wait_ms=200)
                if not fetched.batches:
                    break
                batches += [(h, d) for h, d in fetched.batch_bytes() if h.next_offset > offset and not h.is_control]
                offset = fetched.next_offset
            out[partition] = batches
    return out


def produce(bootstrap: str, topic: str, count: int, start: int = 0) -> None:
    # Not idempotent: Tansu was seen to misreport offsets for idempotent producers (FIELD-NOTES.md).
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "zstd", "linger.ms": 5,
                         "batch.num.messages": 200, "enable.idempotence": False})  # fmt: skip
    for i in range(start, start + count):
        value = json.dumps({"seq": i, "page": f"/p/{i % 31}", "agent": "Mozilla/5.0"}).encode()
        producer.produce(topic, key=str(i).encode(), value=value, partition=i % PARTITIONS)
        producer.poll(0)
    assert producer.flush(30) == 0


def assert_same_batches(source: dict[int, list[Batch]], aggregate: dict[int, list[Batch]]) -> int:
    total = 0
    for partition, src in source.items():
        dst = aggregate.get(partition, [])
        assert len(dst) == len(src), f"partition {partition}: {len(dst)} aggregate batches for {len(src)}"
        for (sh, sd), (dh, dd) in zip(src, dst, strict=True):
            assert dd[HEADER_SIZE:] == sd[HEADER_SIZE:], f"partition {partition}: batch at {sh.base_offset} differs"
            assert (dh.record_count, dh.base_timestamp, dh.compression) == (
                sh.record_count, sh.base_timestamp, sh.compression)  # fmt: skip
        assert records_of(dst) == records_of(src)
        total += sum(h.record_count for h, _ in src)
    return total


def aggregate_count(bootstrap: str, topic: str) -> int:
    try:
        return sum(h.record_count for batches in read_batches(bootstrap, topic).values() for h, _ in batches)
    except Exception:  # not created yet
        return 0


def create_and_fill(tansu: TansuBroker, count: int) -> str:
    topic = f"tansu-src-{uuid.uuid4().hex[:12]}"
    admin = AdminClient({"bootstrap.servers": tansu.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(30)
    produce(tansu.bootstrap, topic, count)
    source = read_until_idle(tansu.bootstrap, topic, PARTITIONS)
    assert sum(h.record_count for b in source.values() for h, _ in b) == count
    # librdkafka sends a batch uncompressed when zstd would not make it smaller: most are zstd.
    assert any(h.compression == Compression.ZSTD for b in source.values() for h, _ in b)
    return topic


def wait_count(mirror: MirrorProcess, bootstrap: str, topic: str, count: int, what: str) -> None:
    def copied() -> bool:
        # A partition the mirror gave up on will never be copied: fail now, with the reason.
        stopped = [line for line in mirror.log_path.read_text().splitlines() if "event=partition_stopped" in line]
        assert not stopped, "\n".join(stopped)
        return aggregate_count(bootstrap, f"{ALIAS}.{topic}") >= count

    wait_for(copied, 60, what, mirror.log_tail)


@contextmanager
def mirroring(
    tansu: TansuBroker, aggregate: Cluster, tmp_path: Path, topic: str, *extra: str
) -> Iterator[MirrorProcess]:
    """A mirror of ``topic`` from Tansu into the aggregate, started; killed on the way out if
    the test left it running."""
    mirror = MirrorProcess(tansu.bootstrap, ALIAS, aggregate.bootstrap, tmp_path / "mirror.log",
                           extra=["--topics", topic, *extra], group=f"mirror-{topic}")  # fmt: skip
    mirror.start()
    try:
        yield mirror
    finally:
        if mirror.running():
            mirror.kill()


def copied_exactly(tansu: TansuBroker, aggregate: Cluster, topic: str) -> int:
    """The records the aggregate holds, once its batches are the source's, byte for byte."""
    source = read_until_idle(tansu.bootstrap, topic, PARTITIONS)
    return assert_same_batches(source, read_batches(aggregate.bootstrap, f"{ALIAS}.{topic}"))


def test_mirror_from_tansu(tansu: TansuBroker, single_broker: Cluster, tmp_path: Path) -> None:
    topic = create_and_fill(tansu, 2000)
    with mirroring(tansu, single_broker, tmp_path, topic) as mirror:
        wait_count(mirror, single_broker.bootstrap, topic, 2000, "the copy")
        produce(tansu.bootstrap, topic, 1000, start=2000)
        wait_count(mirror, single_broker.bootstrap, topic, 3000, "the copy of what came later")
        assert mirror.stop() == 0
    assert copied_exactly(tansu, single_broker, topic) == 3000


def test_restart_after_kill_reconciles_with_tansu(tansu: TansuBroker, single_broker: Cluster, tmp_path: Path) -> None:
    topic = create_and_fill(tansu, 2000)
    # Checkpoints only every minute: after the kill -9 the restart finds none and must reconcile
    # the whole aggregate partition against Tansu's batches (recovery reads the source).
    with mirroring(tansu, single_broker, tmp_path, topic, "--commit-interval-ms", "60000") as mirror:
        wait_count(mirror, single_broker.bootstrap, topic, 2000, "the copy")
        mirror.kill()
        produce(tansu.bootstrap, topic, 500, start=2000)
        mirror.start()
        wait_count(mirror, single_broker.bootstrap, topic, 2500, "the copy after the restart")
        assert mirror.stop() == 0
    assert copied_exactly(tansu, single_broker, topic) == 2500
