"""The mirror against real brokers: a shallow, exact copy."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.mirror import MirrorProcess
from tests.fixtures.zookeeper import ZooKeeperHandle
from tributary.protocol.messages import ApiKey
from tributary.protocol.records import HEADER_SIZE, iter_batches
from tributary.protocol.supported import SUPPORTED_VERSIONS
from tributary.testing.cluster import Cluster, start_cluster

from .helpers import assert_exact_copy, copied_everything, produce_zstd, read_batches, wait_for


@pytest.fixture
def source_and_aggregate(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[tuple[Cluster, Cluster]]:
    (tmp_path / "east").mkdir()
    (tmp_path / "agg").mkdir()
    for east in start_cluster(zookeeper.hosts + "/east", tmp_path / "east", 1, {"num.partitions": "3"}):
        for agg in start_cluster(zookeeper.hosts + "/agg", tmp_path / "agg", 1):
            yield east, agg


def test_copies_batches_byte_for_byte(source_and_aggregate: tuple[Cluster, Cluster], tmp_path: Path) -> None:
    east, agg = source_and_aggregate
    produce_zstd(east.bootstrap, "pageviews", 5000)
    mirror = MirrorProcess(east.bootstrap, "east", agg.bootstrap, tmp_path / "mirror.log")
    mirror.start()
    try:
        wait_for(lambda: copied_everything(east.bootstrap, agg.bootstrap, "east", "pageviews"), 60,
                 "the copy", mirror.log_tail)  # fmt: skip
        produce_zstd(east.bootstrap, "pageviews", 1000, start=5000)
        wait_for(lambda: copied_everything(east.bootstrap, agg.bootstrap, "east", "pageviews"), 60,
                 "the second copy", mirror.log_tail)  # fmt: skip
        assert mirror.stop() == 0
    finally:
        if mirror.running():
            mirror.kill()
    assert assert_exact_copy(east.bootstrap, agg.bootstrap, "east", "pageviews") == 6000


def test_a_batch_damaged_at_the_source_stops_its_partition_there(
    source_and_aggregate: tuple[Cluster, Cluster], tmp_path: Path
) -> None:
    """A byte of a source batch's records flipped in the segment file (bit rot the source broker
    serves unnoticed: sendfile does not look). The mirror stamps its producer fields into every
    batch with the source's CRC carried over the change, so the damage stays visible: the
    aggregate refuses the batch as corrupt, and the mirror, finding the batch fails its own CRC,
    stops that partition there, with the batches before it copied and the other partitions whole.
    (Recomputing the CRC instead would seal the damaged bytes under a fresh CRC and copy them.)"""
    east, agg = source_and_aggregate
    produce_zstd(east.bootstrap, "orders", 6000)
    (broker,) = east.brokers
    segment = max((broker.data_dir / "orders-0").glob("*.log"))
    layout = list(iter_batches(segment.read_bytes()))
    assert len(layout) >= 3, layout
    position, damaged = layout[1]
    with segment.open("r+b") as f:  # the running broker's page cache holds it from here on
        f.seek(position + HEADER_SIZE + (damaged.size - HEADER_SIZE) // 2)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    source = read_batches(east.bootstrap, "orders")

    mirror = MirrorProcess(east.bootstrap, "east", agg.bootstrap, tmp_path / "mirror.log")
    mirror.start()
    try:
        last = damaged.base_offset + damaged.last_offset_delta

        def stopped() -> bool:
            tail = mirror.log_tail()
            return "event=partition_stopped source=orders-0" in tail and "fails its CRC" in tail

        wait_for(stopped, 60, "partition 0 stopped at the damaged batch", mirror.log_tail)

        def others_copied() -> bool:
            copied = read_batches(agg.bootstrap, "east.orders")
            return all(len(copied.get(p, [])) == len(source[p]) for p in (1, 2))

        wait_for(others_copied, 60, "partitions 1 and 2 copied", mirror.log_tail)
        assert f"offsets {damaged.base_offset}-{last}" in mirror.log_tail()
        assert mirror.metric("tributary_mirror_errors_total", source="east", kind="source_batch_corrupt") == 1
        assert mirror.stop() == 0
    finally:
        if mirror.running():
            mirror.kill()
    copied = read_batches(agg.bootstrap, "east.orders")
    # Partition 0: exactly the batch before the damaged one, byte for byte.
    assert [data[HEADER_SIZE:] for _, data in copied[0]] == [data[HEADER_SIZE:] for _, data in source[0][:1]]
    for partition in (1, 2):
        assert [data[HEADER_SIZE:] for _, data in copied[partition]] == [
            data[HEADER_SIZE:] for _, data in source[partition]
        ]


@pytest.fixture
def quick_rebalancing_source(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[tuple[Cluster, Cluster]]:
    """As above, with a source that lets a killed mirror's session expire in 2 s."""
    (tmp_path / "east").mkdir()
    (tmp_path / "agg").mkdir()
    config = {"num.partitions": "3", "group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}
    for east in start_cluster(zookeeper.hosts + "/east", tmp_path / "east", 1, config):
        for agg in start_cluster(zookeeper.hosts + "/agg", tmp_path / "agg", 1):
            yield east, agg


@pytest.mark.parametrize("depth", [5, 1])
def test_pipelined_batches_and_read_ahead_survive_kill_9(
    quick_rebalancing_source: tuple[Cluster, Cluster], tmp_path: Path, depth: int
) -> None:
    """Five batches of a partition in flight to the aggregate (the default, spelled out), or
    one at a time, and eight fetches of it in flight from the source, small ones, killed twice
    mid-copy: still every record once, in order."""
    east, agg = quick_rebalancing_source
    rng = random.Random(19)
    producing = threading.Thread(target=produce_zstd, args=(east.bootstrap, "clicks", 60_000), daemon=True)
    producing.start()
    extra = [
        "--max-inflight-batches-per-partition", str(depth), "--fetch-windows", "8",
        "--fetch-partition-max-bytes", "32768", "--session-timeout-ms", "2000",
    ]  # fmt: skip
    log_path = tmp_path / "mirror.log"
    mirror = MirrorProcess(east.bootstrap, "east", agg.bootstrap, log_path, extra=extra)
    mirror.start()
    try:
        for _ in range(2):
            time.sleep(rng.uniform(1.5, 3.0))
            mirror.kill()
            mirror.start()
        producing.join(120)
        wait_for(lambda: copied_everything(east.bootstrap, agg.bootstrap, "east", "clicks"), 120,
                 "the copy", mirror.log_tail)  # fmt: skip
        assert mirror.stop() == 0
    finally:
        if mirror.running():
            mirror.kill()
    assert assert_exact_copy(east.bootstrap, agg.bootstrap, "east", "clicks") == 60_000
    assert log_path.read_text().count("event=started") == 3


@pytest.mark.skipif(
    (SUPPORTED_VERSIONS[ApiKey.METADATA].hi or 0) < 10, reason="the broker serves no topic ids (Metadata < v10)"
)
def test_two_instances_share_the_source_with_the_consumer_protocol(
    source_and_aggregate: tuple[Cluster, Cluster], tmp_path: Path
) -> None:
    """``--group-protocol consumer``: the source's coordinator assigns (KIP-848); a second
    instance takes some partitions over incrementally, and the copy is still exact."""
    east, agg = source_and_aggregate
    produce_zstd(east.bootstrap, "clicks", 3000)
    extra = ["--group-protocol", "consumer"]
    first = MirrorProcess(east.bootstrap, "east", agg.bootstrap, tmp_path / "first.log", extra=extra)
    second = MirrorProcess(east.bootstrap, "east", agg.bootstrap, tmp_path / "second.log", extra=extra)
    first.start()
    try:
        wait_for(lambda: copied_everything(east.bootstrap, agg.bootstrap, "east", "clicks"), 60,
                 "the copy", first.log_tail)  # fmt: skip
        second.start()
        produce_zstd(east.bootstrap, "clicks", 3000, start=3000)
        wait_for(lambda: copied_everything(east.bootstrap, agg.bootstrap, "east", "clicks"), 60,
                 "the copy by two instances", second.log_tail)  # fmt: skip
        wait_for(lambda: "event=assignment_added" in (tmp_path / "second.log").read_text(), 30,
                 "the second instance to get partitions", second.log_tail)  # fmt: skip
        assert second.stop() == 0
        assert first.stop() == 0
    finally:
        for mirror in (first, second):
            if mirror.running():
                mirror.kill()
    assert assert_exact_copy(east.bootstrap, agg.bootstrap, "east", "clicks") == 6000
