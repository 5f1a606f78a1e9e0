"""The mirror against real brokers: a shallow, exact copy."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.mirror import MirrorProcess
from tests.fixtures.zookeeper import ZooKeeperHandle
from tributary.protocol.messages import ApiKey
from tributary.protocol.supported import SUPPORTED_VERSIONS
from tributary.testing.cluster import Cluster, start_cluster

from .helpers import assert_exact_copy, copied_everything, produce_zstd, wait_for


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
