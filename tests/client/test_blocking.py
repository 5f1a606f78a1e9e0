"""The blocking fetcher of the Spark executors: exact offset ranges, bounds, errors, no trio."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
import trio

from tributary.client.admin.admin import Admin
from tributary.client.blocking import BlockingConnection, BlockingFetcher
from tributary.client.config import ClientConfig
from tributary.client.errors import OffsetOutOfRangeError, RequestTimedOutError, UnknownTopicOrPartitionError
from tributary.client.raw.client import RawClient
from tributary.client.wire.cluster import Cluster
from tributary.protocol.compression import Compression
from tributary.protocol.records import build_batch
from tributary.testing.cluster import Cluster as Brokers

from .conftest import topic_name

BATCHES, PER_BATCH = 10, 10


@pytest.fixture(scope="module")
def filled_topic(shared_cluster: Brokers) -> str:
    """A topic of two partitions: partition 0 holds 10 zstd batches of 10 records (offsets 0-99)."""
    topic = topic_name("blocking")

    async def fill() -> None:
        async with Cluster(shared_cluster.bootstrap) as cluster:
            await Admin(cluster).create_topic(topic, 2)
            raw = RawClient(cluster)
            for b in range(BATCHES):
                records = [(b"k", b"value-%d" % (b * PER_BATCH + r), (), None) for r in range(PER_BATCH)]
                await raw.produce_partition(topic, 0, build_batch(records, compression=Compression.ZSTD))

    trio.run(fill)
    return topic


@pytest.fixture
def fetcher(shared_cluster: Brokers) -> Iterator[BlockingFetcher]:
    with BlockingFetcher(shared_cluster.bootstrap) as f:
        yield f


@pytest.mark.parametrize(("start", "end"), [(0, 100), (13, 57), (13, 14), (20, 20), (99, 100), (10, 20)])
def test_records_of_a_range_are_exactly_the_range(
    fetcher: BlockingFetcher, filled_topic: str, start: int, end: int
) -> None:
    records = list(fetcher.records(filled_topic, 0, start, end))
    assert [r.offset for r in records] == list(range(start, end))
    assert [r.value for r in records] == [b"value-%d" % o for o in range(start, end)]


def test_small_fetches_walk_the_range_batch_by_batch(fetcher: BlockingFetcher, filled_topic: str) -> None:
    fetched = list(fetcher.fetch_range(filled_topic, 0, 5, 95, max_bytes=64))  # below one batch's size
    assert len(fetched) == BATCHES  # one batch per fetch: the broker always returns a whole one
    assert fetched[0].batches[0][1].base_offset == 0  # the batch holding offset 5 starts before it
    assert fetched[-1].next_offset == 100
    assert all(f.batches[0][1].compression is Compression.ZSTD for f in fetched)
    offsets = [r.offset for f in fetched for r in f.iter_records(5, 95)]
    assert offsets == list(range(5, 95))


def test_offset_bounds_for_the_planner(fetcher: BlockingFetcher, filled_topic: str) -> None:
    assert fetcher.partitions_for(filled_topic) == [0, 1]
    assert fetcher.offset_bounds(filled_topic) == {0: (0, 100), 1: (0, 0)}
    assert list(fetcher.records(filled_topic, 1, 0, 0)) == []


def test_ranges_outside_the_log_are_refused_with_the_range_named(fetcher: BlockingFetcher, filled_topic: str) -> None:
    with pytest.raises(
        OffsetOutOfRangeError,
        match=rf"offsets \[90, 150\) of {filled_topic}-0 are not all in the log, which holds \[0, 100\)",
    ) as caught:
        list(fetcher.records(filled_topic, 0, 90, 150))
    assert (caught.value.topic, caught.value.partition) == (filled_topic, 0)
    with pytest.raises(OffsetOutOfRangeError, match=rf"offsets \[150, 160\) of {filled_topic}-0 .* \[0, 100\)"):
        list(fetcher.fetch_range(filled_topic, 0, 150, 160))
    with pytest.raises(ValueError, match="start is after end"):
        list(fetcher.fetch_range(filled_topic, 0, 10, 5))


def test_unknown_topics_are_named(shared_cluster: Brokers) -> None:
    missing = topic_name("missing")
    # (A topic may be missing only until it is created: by default the fetcher retries a few times.)
    fetcher = BlockingFetcher(shared_cluster.bootstrap, retries=0)
    with pytest.raises(UnknownTopicOrPartitionError, match=f"topic '{missing}'"):
        fetcher.offset_bounds(missing)
    with pytest.raises(UnknownTopicOrPartitionError, match=f"{missing}-3"), fetcher:
        list(fetcher.records(missing, 3, 0, 1))


def test_a_silent_broker_times_out() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()  # connections complete in the backlog; nobody ever answers
        port = listener.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(RequestTimedOutError, match=r"API_VERSIONS v3 to broker 127.0.0.1:\d+ got no response"):
            BlockingConnection("127.0.0.1", port, config=ClientConfig(connect_timeout=0.5))
        assert time.monotonic() - started < 5


def test_the_blocking_fetcher_does_not_import_trio() -> None:
    code = "import sys, client.blocking, client; assert 'trio' not in sys.modules, 'trio was imported'"
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=60)
