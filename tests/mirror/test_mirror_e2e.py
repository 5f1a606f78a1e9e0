"""The issue's end-to-end picture on one machine: east and west (each its own ZooKeeper and
three brokers) mirrored into an aggregate cluster (the same), by two mirror daemons.

confluent-kafka producers write zstd batches into both sources; afterwards the aggregate
holds every record exactly once, in order per partition, and the compressed record blobs
of the aggregate's batches are byte-identical to the sources'.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.mirror import MirrorProcess
from tests.fixtures.zookeeper import LocalZooKeeper
from tributary.testing.cluster import Cluster, start_cluster

from .helpers import assert_exact_copy, copied_everything, produce_zstd, wait_for

SOURCE_CONFIG = {"num.partitions": "6", "group.initial.rebalance.delay.ms": "0"}
TOPICS = ("pageviews", "searches")


@contextlib.contextmanager
def datacenter(root: Path, name: str, config: dict[str, str]) -> Iterator[Cluster]:
    """A cluster with a ZooKeeper of its own, as a datacenter has."""
    workdir = Path(tempfile.mkdtemp(prefix=f"tributary-zk-{name}-"))
    zookeeper = LocalZooKeeper(workdir)
    zookeeper.start()
    try:
        (root / name).mkdir()
        yield from start_cluster(zookeeper.hosts, root / name, 3, config)
    finally:
        zookeeper.stop(kill=True)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def datacenters(tmp_path: Path) -> Iterator[tuple[Cluster, Cluster, Cluster]]:
    with (
        datacenter(tmp_path, "east", SOURCE_CONFIG) as east,
        datacenter(tmp_path, "west", SOURCE_CONFIG) as west,
        datacenter(tmp_path, "aggregate", {}) as aggregate,
    ):
        yield east, west, aggregate


def test_two_datacenters_into_the_aggregate(datacenters: tuple[Cluster, Cluster, Cluster], tmp_path: Path) -> None:
    east, west, aggregate = datacenters
    sources = {"east": east, "west": west}

    def produce(alias: str, start: int) -> None:
        for topic in TOPICS:
            produce_zstd(sources[alias].bootstrap, topic, 20_000, start=start, source=alias)

    # Some data before the mirrors start, some while they run.
    for alias in sources:
        produce(alias, 0)
    mirrors = [MirrorProcess(c.bootstrap, alias, aggregate.bootstrap, tmp_path / f"mirror-{alias}.log")
               for alias, c in sources.items()]  # fmt: skip
    for mirror in mirrors:
        mirror.start()
    try:
        threads = [threading.Thread(target=produce, args=(alias, 20_000)) for alias in sources]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for mirror in mirrors:
            for topic in TOPICS:
                wait_for(lambda m=mirror, t=topic: copied_everything(m.source, aggregate.bootstrap, m.alias, t), 120,
                         f"{mirror.alias}.{topic}", mirror.log_tail)  # fmt: skip
        for mirror in mirrors:
            assert mirror.stop() == 0
    finally:
        for mirror in mirrors:
            if mirror.running():
                mirror.kill()
    for alias, cluster in sources.items():
        for topic in TOPICS:
            assert assert_exact_copy(cluster.bootstrap, aggregate.bootstrap, alias, topic) == 40_000
