"""The mirror's features against real brokers: discovery, partition growth, what is never
mirrored, copied topic configs, idempotent producers, two instances in one group, exact
offset translation, and a clean stop.

One source cluster ("east") and one aggregate cluster of one broker each, in two chroots
of the session's ZooKeeper, shared by the module (starting brokers takes seconds). Each
test uses topics of its own prefix and a mirror of its own (own group, ``--topics`` limited
to its prefix), so the tests do not see each other's data.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from tests.fixtures.brokers import module_cluster
from tests.fixtures.mirror import MirrorProcess
from tests.fixtures.prometheus import scrape
from tests.fixtures.zookeeper import ZooKeeperServer
from tributary.protocol.records import validate_batch
from tributary.testing.cluster import Cluster

from .helpers import assert_exact_copy, copied_everything, end_offsets, produce_zstd, read_batches, wait_for

ROOT = Path(__file__).resolve().parents[2]
ALIAS = "east"


# --- fixtures and helpers ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def clusters(
    zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, Cluster]]:
    root = tmp_path_factory.mktemp("mirror-features")
    (root / "east").mkdir()
    (root / "agg").mkdir()
    for east in module_cluster(zookeeper_server, root / "east", size=1):
        for agg in module_cluster(zookeeper_server, root / "agg", size=1):
            yield east, agg


class Mirrors:
    """The mirror processes a test started; whatever is still running at the end is killed."""

    def __init__(self, east: Cluster, agg: Cluster, tmp_path: Path) -> None:
        self.east = east
        self.agg = agg
        self.tmp_path = tmp_path
        self.started: list[MirrorProcess] = []

    def start(self, *extra: str, group: str, name: str = "mirror") -> MirrorProcess:
        mirror = MirrorProcess(self.east.bootstrap, ALIAS, self.agg.bootstrap, self.tmp_path / f"{name}.log",
                               extra=list(extra), group=group)  # fmt: skip
        self.started.append(mirror)
        mirror.start()
        return mirror

    def logs(self) -> str:
        return "\n".join(f"--- {m.log_path.name}\n{m.log_tail()}" for m in self.started)

    def cleanup(self) -> None:
        for mirror in self.started:
            if mirror.running():
                mirror.kill()


@pytest.fixture
def mirrors(clusters: tuple[Cluster, Cluster], tmp_path: Path) -> Iterator[Mirrors]:
    east, agg = clusters
    started = Mirrors(east, agg, tmp_path)
    try:
        yield started
    finally:
        started.cleanup()


def create_topic(bootstrap: str, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                            config=config or {})], operation_timeout=10)  # fmt: skip
    futures[name].result(timeout=30)


def topic_names(bootstrap: str) -> set[str]:
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


def produce_keyed(bootstrap: str, topic: str, per_partition: dict[int, range], *, idempotent: bool = True) -> None:
    """Records keyed ``<partition>-<i>`` into each partition, zstd, in order."""
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "zstd", "linger.ms": 5,
                         "enable.idempotence": idempotent})  # fmt: skip
    for partition, numbers in per_partition.items():
        for i in numbers:
            producer.produce(topic, key=f"{partition}-{i}".encode(), value=f"value {partition} {i}".encode(),
                             partition=partition)  # fmt: skip
        producer.poll(0)
    assert producer.flush(30) == 0


def committed(bootstrap: str, group: str, topic: str, partitions: list[int]) -> dict[int, int]:
    """A group's committed offsets (-1001 where none), through librdkafka."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        result = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=10)
        return {tp.partition: tp.offset for tp in result}
    finally:
        consumer.close()


def wait_copied(mirrors: Mirrors, topic: str, timeout: float = 60) -> None:
    east, agg = mirrors.east, mirrors.agg
    wait_for(lambda: copied_everything(east.bootstrap, agg.bootstrap, ALIAS, topic), timeout,
             f"the copy of {topic}", mirrors.logs)  # fmt: skip


def wait_checkpointed(mirrors: Mirrors, group: str, topic: str, timeout: float = 30) -> None:
    """Until the mirror's checkpoints in the aggregate cover every record of the aggregate topic
    (checkpoints follow the flush of the translation entries)."""
    target = f"{ALIAS}.{topic}"

    def done() -> bool:
        ends = end_offsets(mirrors.agg.bootstrap, target)
        return committed(mirrors.agg.bootstrap, group, target, sorted(ends)) == ends

    wait_for(done, timeout, f"the checkpoints of {target}", mirrors.logs)


# --- (a) discovery -------------------------------------------------------------------------------


def test_new_topic_is_mirrored_within_10_s(mirrors: Mirrors) -> None:
    # The default discovery interval (5 s), not the fixture's faster one: the promise is about defaults.
    mirrors.start("--topics", "a-.*", "--discovery-interval-ms", "5000", group="mirror-a")
    create_topic(mirrors.east.bootstrap, "a-fresh", 2)
    created = time.monotonic()
    produce_keyed(mirrors.east.bootstrap, "a-fresh", {0: range(20), 1: range(20)})
    wait_copied(mirrors, "a-fresh", timeout=30)
    elapsed = time.monotonic() - created
    print(f"a-fresh mirrored {elapsed:.2f} s after its creation")
    assert elapsed < 10, f"mirrored only {elapsed:.1f} s after creation"
    assert assert_exact_copy(mirrors.east.bootstrap, mirrors.agg.bootstrap, ALIAS, "a-fresh") == 40


# --- (b) partition growth ------------------------------------------------------------------------


def test_partition_growth_is_followed(mirrors: Mirrors) -> None:
    east, agg = mirrors.east, mirrors.agg
    create_topic(east.bootstrap, "b-grow", 2)
    produce_keyed(east.bootstrap, "b-grow", {0: range(50), 1: range(50)})
    mirrors.start("--topics", "b-.*", group="mirror-b")
    wait_copied(mirrors, "b-grow")
    admin = AdminClient({"bootstrap.servers": east.bootstrap})  # kept alive until the answer came
    admin.create_partitions([NewPartitions("b-grow", 4)])["b-grow"].result(timeout=30)
    grown = time.monotonic()
    produce_keyed(east.bootstrap, "b-grow", {0: range(50, 60), 2: range(30), 3: range(40)})

    def aggregate_grown() -> bool:
        return len(end_offsets(agg.bootstrap, f"{ALIAS}.b-grow")) == 4

    wait_for(aggregate_grown, 30, "the aggregate topic's new partitions", mirrors.logs)
    wait_copied(mirrors, "b-grow")
    print(f"b-grow's new partitions copied {time.monotonic() - grown:.2f} s after the growth")
    assert assert_exact_copy(east.bootstrap, agg.bootstrap, ALIAS, "b-grow") == 50 + 60 + 30 + 40


# --- (c) what is never mirrored ------------------------------------------------------------------


def test_internal_and_aliased_topics_are_never_mirrored(mirrors: Mirrors) -> None:
    east, agg = mirrors.east, mirrors.agg
    # __consumer_offsets exists once a group committed on the source.
    seed = Consumer({"bootstrap.servers": east.bootstrap, "group.id": "seed-c"})
    create_topic(east.bootstrap, "seed-c", 1)
    seed.commit(offsets=[TopicPartition("seed-c", 0, 0)], asynchronous=False)
    seed.close()
    forbidden = ["__tributary_mirror_offsets", "west.x", "east.y"]
    for name in forbidden:
        create_topic(east.bootstrap, name, 1)
        produce_keyed(east.bootstrap, name, {0: range(10)})
    create_topic(east.bootstrap, "c-ok", 1)
    produce_keyed(east.bootstrap, "c-ok", {0: range(10)})
    source_topics = topic_names(east.bootstrap)
    assert {"__consumer_offsets", *forbidden} <= source_topics, source_topics
    # The include pattern matches all of them: only the mirror's own rules keep them out.
    mirror = mirrors.start("--topics", r"c-.*|__.*|west\..*|east\..*", "--known-aliases", "west", group="mirror-c")
    wait_copied(mirrors, "c-ok")
    # Discovery rounds after everything existed: a topic created now is found, the others still not.
    create_topic(east.bootstrap, "c-late", 1)
    produce_keyed(east.bootstrap, "c-late", {0: range(5)})
    wait_copied(mirrors, "c-late")
    aggregate = topic_names(agg.bootstrap)
    assert {"east.c-ok", "east.c-late"} <= aggregate
    never = {f"{ALIAS}.{name}" for name in ("__consumer_offsets", *forbidden)}
    assert not never & aggregate, f"mirrored: {sorted(never & aggregate)}"
    scraped = scrape(mirror.metrics_port)
    assert {dict(k)["topic"] for k in scraped.matching("tributary_mirror_copied_records_total")} <= {"c-ok", "c-late"}


# --- (d) topic configs -----------------------------------------------------------------------------


def test_topic_configs_are_copied(mirrors: Mirrors) -> None:
    east, agg = mirrors.east, mirrors.agg
    create_topic(east.bootstrap, "d-conf", 2, {"retention.ms": "12345"})
    mirrors.start("--topics", "d-.*", group="mirror-d")
    wait_for(lambda: f"{ALIAS}.d-conf" in topic_names(agg.bootstrap), 30, "the aggregate topic", mirrors.logs)
    admin = AdminClient({"bootstrap.servers": agg.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, f"{ALIAS}.d-conf")
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    assert configs["retention.ms"].value == "12345"
    assert len(end_offsets(agg.bootstrap, f"{ALIAS}.d-conf")) == 2


# --- (e) idempotent producers ----------------------------------------------------------------------


def test_batches_arrive_under_the_mirrors_own_producer_with_valid_crc(mirrors: Mirrors) -> None:
    """The source's producer never reaches the aggregate: each aggregate partition's batches
    carry a producer id of the mirror's own, one per partition (the source producer wrote both
    partitions under one id), numbered from sequence 0 without a gap (what lets the aggregate
    recognise a batch the mirror had to send again)."""
    east, agg = mirrors.east, mirrors.agg
    create_topic(east.bootstrap, "e-idem", 2)
    produce_zstd(east.bootstrap, "e-idem", 3000)  # enable.idempotence = true
    mirrors.start("--topics", "e-.*", group="mirror-e")
    wait_copied(mirrors, "e-idem")
    source = read_batches(east.bootstrap, "e-idem")
    source_ids = {h.producer_id for batches in source.values() for h, _ in batches}
    assert len(source_ids) == 1 and min(source_ids) >= 0, "one idempotent producer at the source"
    aggregate = read_batches(agg.bootstrap, f"{ALIAS}.e-idem")
    count = 0
    per_partition: set[int] = set()
    for batches in aggregate.values():
        expected_sequence = 0
        mirror_ids = set()
        for header, data in batches:
            checked = validate_batch(data)  # CRC recomputed over the still-compressed records
            assert checked.producer_id >= 0
            assert checked.producer_epoch >= 0
            assert checked.base_sequence == expected_sequence
            expected_sequence += checked.last_offset_delta + 1
            mirror_ids.add(checked.producer_id)
            assert not header.is_transactional
            count += 1
        assert len(mirror_ids) == 1, "one producer id per partition while nothing failed"
        per_partition |= mirror_ids
    assert len(per_partition) == len(aggregate) == 2
    assert count == sum(len(b) for b in source.values())
    assert assert_exact_copy(east.bootstrap, agg.bootstrap, ALIAS, "e-idem") == 3000


# --- (f) two instances in one group ----------------------------------------------------------------


class BackgroundProducer:
    """Produces keyed records into every partition of a topic until stopped; counts them."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.sent = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            producer = Producer({"bootstrap.servers": self.bootstrap, "compression.type": "zstd",
                                 "linger.ms": 100, "enable.idempotence": True})  # fmt: skip
            i = 0
            while not self._stop.is_set():
                for p in range(self.partitions):
                    producer.produce(self.topic, key=f"{p}-{i}".encode(), value=b"x" * 100, partition=p)
                i += 1
                self.sent = i * self.partitions
                producer.poll(0)
                time.sleep(0.01)  # ~600 records/s in batches of ~10: a steady stream, not a benchmark
            assert producer.flush(30) == 0
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(60)
        if self.error is not None:
            raise self.error
        return self.sent


def assigned(mirror: MirrorProcess) -> int:
    return int(scrape(mirror.metrics_port).value("tributary_mirror_assigned_partitions", source=ALIAS))


def test_two_instances_split_and_take_over(mirrors: Mirrors) -> None:
    east, agg = mirrors.east, mirrors.agg
    create_topic(east.bootstrap, "f-split", 6)
    producing = BackgroundProducer(east.bootstrap, "f-split", 6)
    producing.start()
    try:
        first = mirrors.start("--topics", "f-.*", group="mirror-f", name="first")
        wait_for(lambda: assigned(first) == 6, 30, "the first instance to take all 6", mirrors.logs)
        second = mirrors.start("--topics", "f-.*", group="mirror-f", name="second")
        joined = time.monotonic()

        def split() -> bool:
            counts = (assigned(first), assigned(second))
            return sum(counts) == 6 and min(counts) > 0

        wait_for(split, 60, "the two instances to split the 6 partitions", mirrors.logs)
        print(f"split: first {assigned(first)}, second {assigned(second)} after {time.monotonic() - joined:.2f} s")
        before = producing.sent
        assert first.stop() == 0
        stopped = time.monotonic()
        wait_for(lambda: assigned(second) == 6, 30, "the second instance to take all 6", mirrors.logs)
        print(f"takeover after {time.monotonic() - stopped:.2f} s")
        wait_for(lambda: producing.sent > before + 1200, 30, "more records produced after the first stopped")
    finally:
        sent = producing.stop()
    drained = time.monotonic()
    wait_copied(mirrors, "f-split")
    batches = sum(len(b) for b in read_batches(east.bootstrap, "f-split").values())
    print(f"{sent} records in {batches} batches; copied {time.monotonic() - drained:.2f} s after the producer stopped")
    assert second.running()
    assert assert_exact_copy(east.bootstrap, agg.bootstrap, ALIAS, "f-split") == sent


# --- (g) offset translation ------------------------------------------------------------------------


def translate(mirrors: Mirrors, group: str) -> list[dict[str, object]]:
    result = subprocess.run(
        [sys.executable, "-m", "tributary.deploy.cli", "mirror", "translate", "--group", group,
         "--source", mirrors.east.bootstrap, "--source-alias", ALIAS, "--target", mirrors.agg.bootstrap,
         "--topics", "g-.*", "--apply", "--output", "json"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    rows: list[dict[str, object]] = json.loads(result.stdout)
    return rows


def test_translated_group_resumes_at_exactly_the_next_record(mirrors: Mirrors) -> None:
    east, agg = mirrors.east, mirrors.agg
    topic, group = "g-orders", "g-app"
    create_topic(east.bootstrap, topic, 3)
    # Several flushes: several batches per partition, so committed offsets fall inside batches.
    for chunk in range(3):
        produce_keyed(east.bootstrap, topic, {p: range(chunk * 100, chunk * 100 + 100) for p in range(3)})
    # The application consumes part of the topic and commits: in the middle of a batch (137),
    # at the very start (0) and at the end (300).
    wanted = {0: 137, 1: 0, 2: 300}
    consumer = Consumer({"bootstrap.servers": east.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.subscribe([topic])
    seen: dict[int, int] = {}
    deadline = time.monotonic() + 30
    while any(seen.get(p, 0) < n for p, n in wanted.items()):
        assert time.monotonic() < deadline, f"consumed only up to {seen}"
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        partition, offset = msg.partition(), msg.offset()
        assert partition is not None and offset is not None
        seen[partition] = offset + 1
    consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in wanted.items()], asynchronous=False)
    consumer.close()
    assert committed(east.bootstrap, group, topic, [0, 1, 2]) == wanted

    mirrors.start("--topics", "g-.*", group="mirror-g")
    wait_copied(mirrors, topic)
    wait_checkpointed(mirrors, "mirror-g", topic)
    rows = translate(mirrors, group)
    by_partition = {int(str(r["partition"])): r for r in rows}
    assert sorted(by_partition) == [0, 1, 2], rows
    for p, offset in wanted.items():
        row = by_partition[p]
        assert (row["topic"], row["source_offset"], row["aggregate_topic"]) == (topic, offset, f"{ALIAS}.{topic}")
        # The aggregate topic is a batch-for-batch copy from offset 0 with no markers: same offsets.
        assert row["aggregate_offset"] == offset, row
        assert row["problem"] is None
    assert committed(agg.bootstrap, group, f"{ALIAS}.{topic}", [0, 1, 2]) == wanted

    # More records, copied; then the application fails over to the aggregate.
    produce_keyed(east.bootstrap, topic, {p: range(300, 320) for p in range(3)})
    wait_copied(mirrors, topic)
    # auto.offset.reset=error: without a committed offset the consumer fails instead of guessing.
    failover = Consumer({"bootstrap.servers": agg.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "error"})  # fmt: skip
    failover.subscribe([f"{ALIAS}.{topic}"])
    got: dict[int, list[str]] = {0: [], 1: [], 2: []}
    deadline = time.monotonic() + 60
    try:
        while sum(len(v) for v in got.values()) < sum(320 - o for o in wanted.values()):
            assert time.monotonic() < deadline, f"read only {got}"
            msg = failover.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            key, partition = msg.key(), msg.partition()
            assert key is not None and partition is not None
            got[partition].append(key.decode())
        extra = failover.poll(1.0)
        assert extra is None or extra.error() is not None, f"re-read or extra record {extra.key()!r}"
    finally:
        failover.close()
    for p, offset in wanted.items():
        assert got[p] == [f"{p}-{i}" for i in range(offset, 320)], f"partition {p}: {got[p][:3]}..."


# --- (h) SIGTERM -------------------------------------------------------------------------------------


def test_sigterm_exits_0_with_progress_recorded(mirrors: Mirrors) -> None:
    east, agg = mirrors.east, mirrors.agg
    create_topic(east.bootstrap, "h-stop", 3)
    produce_zstd(east.bootstrap, "h-stop", 2000)
    mirror = mirrors.start("--topics", "h-.*", group="mirror-h")
    wait_copied(mirrors, "h-stop")
    source = read_batches(east.bootstrap, "h-stop")

    def counted() -> bool:
        s = scrape(mirror.metrics_port)
        return s.get("tributary_mirror_copied_records_total", source=ALIAS, topic="h-stop") >= 2000

    wait_for(counted, 10, "the copied-records counter", mirrors.logs)
    s = scrape(mirror.metrics_port)
    assert s.value("tributary_mirror_copied_records_total", source=ALIAS, topic="h-stop") == 2000
    assert s.value("tributary_mirror_copied_batches_total", source=ALIAS, topic="h-stop") == sum(
        len(b) for b in source.values())  # fmt: skip
    assert s.value("tributary_mirror_copied_bytes_total", source=ALIAS, topic="h-stop") == sum(
        len(d) for b in source.values() for _, d in b)  # fmt: skip
    assert s.value("tributary_mirror_assigned_partitions", source=ALIAS) == 3
    assert s.value("tributary_mirror_link_up", source=ALIAS, side="source") == 1
    assert s.value("tributary_mirror_link_up", source=ALIAS, side="target") == 1
    assert mirror.stop() == 0
    assert "event=stopped" in mirror.log_path.read_text()
    # Progress was recorded on the way out: the checkpoints cover everything copied.
    ends = end_offsets(agg.bootstrap, f"{ALIAS}.h-stop")
    assert committed(agg.bootstrap, "mirror-h", f"{ALIAS}.h-stop", [0, 1, 2]) == ends
    assert sum(ends.values()) == 2000
