"""kcat (Debian's 1.7.1 on librdkafka 2.0.2) against a real three-broker cluster.

librdkafka 2.0.2 enables message format v2, zstd and the like only when the versions it probes
for fall inside the advertised ranges, so these tests are the first to notice an advertised range
that drifted out of what it expects.
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.brokers import module_cluster
from tests.interop.wire import broker_by_id, create_topics, stored_batch_bytes, wait_for_topic
from tributary.protocol.compression import Compression, compress
from tributary.protocol.records import HEADER_SIZE, BatchHeader, iter_batches
from tributary.testing.cluster import BrokerProcess, Cluster
from tributary.testing.zookeeper import ZooKeeperServer

KCAT = shutil.which("kcat") or "/usr/bin/kcat"
MESSAGES = 10_000
TIMEOUT = 60.0
# Our codec and librdkafka's may frame the same data a few bytes apart (content size, checksum).
FRAME_SLACK = 16

pytestmark = pytest.mark.skipif(not Path(KCAT).exists(), reason="kcat is not installed (apt-get install kcat)")


@pytest.fixture(scope="module")
def broker_cluster(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three brokers shared by the module's tests (each test writes topics of its own)."""
    yield from module_cluster(zookeeper_server, tmp_path_factory.mktemp("kcat"))


def kcat(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    result = subprocess.run([KCAT, *args], input=stdin, capture_output=True, timeout=TIMEOUT, check=False)
    assert result.returncode == 0, f"kcat {' '.join(args)} exited {result.returncode}: {result.stderr.decode()}"
    return result


def message_lines(count: int, seed: int) -> bytes:
    """``count`` newline-terminated messages of varied length and content (no newlines inside)."""
    rng = random.Random(seed)
    alphabet = bytes(b for b in range(32, 127))
    lines = []
    for i in range(count):
        body = bytes(rng.choices(alphabet, k=rng.randrange(0, 200)))
        lines.append(b"%05d:%s\n" % (i, body))
    return b"".join(lines)


def segment_batches(broker: BrokerProcess, topic: str, partition: int) -> list[tuple[BatchHeader, bytes]]:
    """Every batch in the partition's segment files on ``broker``'s disk, read from the files."""
    directory = Path(broker.data_dir) / f"{topic}-{partition}"
    found = []
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        found += [(header, data[pos : pos + header.size]) for pos, header in iter_batches(data)]
    return found


# librdkafka up to 2.11 (Debian's kcat links 2.0.2) compresses with gzip, snappy or lz4 only when
# the broker's Produce range reaches down to v0: rd_kafka_msgset_writer_select_MsgVersion() asks
# rd_kafka_broker_ApiVersion_supported(rkb, Produce, 0, 0), and otherwise logs "Broker does not
# support compression type gzip: not compressing batch" (debug only) and sends the batch plain. The
# broker advertises Produce 0-11 for it (refusing magic 0 and 1 message sets all the same).
@pytest.mark.parametrize("codec", ["zstd", "gzip", "lz4", "snappy"])
def test_produce_and_consume_10k_compressed_messages(broker_cluster: Cluster, tmp_path: Path, codec: str) -> None:
    topic = f"kcat-{codec}"
    sent = message_lines(MESSAGES, seed=len(codec))
    source = tmp_path / "sent.txt"
    source.write_bytes(sent)

    # The topic exists, with its leader known everywhere, before kcat writes: an auto-created one
    # refuses the first produce requests (NOT_LEADER_OR_FOLLOWER until every broker has seen it),
    # and librdkafka retries them behind later ones. Idempotent, so that any retry keeps the order.
    create_topics(broker_cluster, {topic: 1})
    wait_for_topic(broker_cluster, topic, 1)
    kcat("-P", "-b", broker_cluster.bootstrap, "-t", topic, "-p", "0", "-z", codec, "-X", "enable.idempotence=true",
         "-l", str(source))  # fmt: skip

    received = kcat(
        "-C", "-b", broker_cluster.bootstrap, "-t", topic, "-p", "0",
        "-o", "beginning", "-e", "-q", "-c", str(MESSAGES), "-X", "check.crcs=true",
    ).stdout  # fmt: skip
    (tmp_path / "received.txt").write_bytes(received)
    assert len(received) == len(sent)
    assert received == sent

    # The segment files hold the batches as kcat compressed them, and nothing else. librdkafka
    # sends a batch uncompressed when its codec would not make it smaller
    # (rd_kafka_msgset_writer_compress: "compressed data is larger than the uncompressed size"),
    # which happens to a lone short message at the tail of a linger; such a batch is the only one
    # allowed to arrive plain.
    leader = broker_by_id(broker_cluster, wait_for_topic(broker_cluster, topic, 1)[0])
    batches = segment_batches(leader, topic, 0)
    assert sum(h.record_count for h, _ in batches) == MESSAGES
    wanted = Compression[codec.upper()]
    for header, batch in batches:
        if header.compression == wanted:
            continue
        records = batch[HEADER_SIZE:]
        assert header.compression == Compression.NONE and len(compress(wanted, records)) + FRAME_SLACK >= len(
            records
        ), (
            f"kcat -z {codec}: a batch of {header.record_count} records ({len(records)} bytes)"
            f" at offset {header.base_offset} is stored as {header.compression.name}"
        )
    compressed = [h for h, _ in batches if h.compression == wanted]
    assert sum(h.record_count for h in compressed) > MESSAGES * 0.9, [h.compression.name for h, _ in batches]
    # ... and what the broker serves is those bytes (the read above went through them too).
    assert [b for _, b in stored_batch_bytes(leader, topic, 0, MESSAGES)] == [b for _, b in batches]


def test_metadata_lists_every_broker_and_topic(broker_cluster: Cluster) -> None:
    wanted = {"kcat-one": 1, "kcat-four": 4, "kcat-six": 6}
    create_topics(broker_cluster, wanted)
    leaders = {name: wait_for_topic(broker_cluster, name, count) for name, count in wanted.items()}

    listing = kcat("-L", "-b", broker_cluster.bootstrap, "-m", "10").stdout.decode()

    brokers = {
        int(m["id"]): (m["host"], int(m["port"]))
        for m in re.finditer(r"^  broker (?P<id>\d+) at (?P<host>[^:\s]+):(?P<port>\d+)", listing, re.M)
    }
    assert brokers == {b.broker_id: b.address for b in broker_cluster.brokers}, listing
    assert re.search(r"^ 3 brokers:$", listing, re.M), listing
    assert len(re.findall(r"\(controller\)", listing)) == 1, listing

    topics: dict[str, list[tuple[int, int]]] = {}
    counts: dict[str, int] = {}
    current: str | None = None
    for line in listing.splitlines():
        if m := re.match(r'^  topic "(?P<name>[^"]+)" with (?P<count>\d+) partitions:$', line):
            current = m["name"]
            topics[current] = []
            counts[current] = int(m["count"])
        elif m := re.match(r"^    partition (?P<p>\d+), leader (?P<leader>-?\d+), replicas: (?P<r>\d+),", line):
            assert current is not None
            assert m["r"] == m["leader"], line  # one replica, the leader
            topics[current].append((int(m["p"]), int(m["leader"])))
    assert {name: counts[name] for name in wanted} == wanted, listing
    assert {name: len(topics[name]) for name in wanted} == wanted, listing
    assert {name: dict(topics[name]) for name in wanted} == leaders, listing
    # Round-robin placement: six partitions over three brokers lead two each.
    assert sorted(leaders["kcat-six"].values()) == [1, 1, 2, 2, 3, 3], listing
