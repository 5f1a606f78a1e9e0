"""A flood of auto-created topics under a low file descriptor limit: logs beyond
``log.max.open.logs`` are closed and reopened on demand, so the broker keeps its ZooKeeper
session and its clients, and every topic still takes and serves records."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.zookeeper import ZooKeeperServer
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import MetadataRequest
from tributary.testing.cluster import BrokerProcess

from .wire_helpers import METADATA_V, Bystander, batch, connect, fetch_bytes, produce, running_broker, values

FD_LIMIT = 256
MAX_OPEN_LOGS = 40
TOPICS = 100  # three partitions each: 300 logs, 900 descriptors if all stayed open


@pytest.fixture
def limited_broker(zookeeper_server: ZooKeeperServer, tmp_path: Path) -> Iterator[BrokerProcess]:
    settings = {
        "num.partitions": "3",
        "log.max.open.logs": str(MAX_OPEN_LOGS),
        "auto.create.topics.max.per.second": "1000",
    }
    with running_broker(zookeeper_server, tmp_path, settings) as cluster:
        broker = cluster.brokers[0]
        assert broker.proc is not None
        # Lowered once it runs: the broker raises its own soft limit to the hard one at start.
        subprocess.run(["prlimit", f"--pid={broker.proc.pid}", f"--nofile={FD_LIMIT}:{FD_LIMIT}"], check=True)
        yield broker


def _open_descriptors(broker: BrokerProcess) -> int:
    assert broker.proc is not None
    return len(os.listdir(f"/proc/{broker.proc.pid}/fd"))


def test_a_flood_of_new_topics_stays_within_the_descriptor_limit(limited_broker: BrokerProcess) -> None:
    broker = limited_broker
    bystander = Bystander(broker)
    bystander.check()
    names = [f"flood-{i:03d}" for i in range(TOPICS)]
    answers: dict[str, int] = {}
    with connect(broker) as conn:
        for start in range(0, TOPICS, 50):
            request = MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names[start : start + 50]],
                allow_auto_topic_creation=True,
            )
            answers.update({t.name: t.error_code for t in conn.request(request, METADATA_V).topics})
            bystander.check()
            assert _open_descriptors(broker) < FD_LIMIT - 32
        assert set(answers.values()) <= {ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE}
        # Every topic takes and serves records, its log opened again if it had been closed.
        for name in names[::10]:
            for partition in range(3):
                assert produce(conn, name, batch(b"%s-%d" % (name.encode(), partition)), partition) == (0, 0)
                assert values(fetch_bytes(conn, name, 0, partition)) == [b"%s-%d" % (name.encode(), partition)]
    partitions = [d for d in (broker.data_dir).iterdir() if d.name.startswith("flood-")]
    assert len(partitions) == 3 * TOPICS
    assert _open_descriptors(broker) < FD_LIMIT - 32
    log = broker.log_path.read_text()
    assert "Too many open files" not in log, broker.log_tail()
    assert "ZooKeeper connection suspended" not in log
    bystander.check()
    bystander.close()
