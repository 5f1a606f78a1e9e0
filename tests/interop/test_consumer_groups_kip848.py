"""confluent-kafka consumers with ``group.protocol=consumer`` (librdkafka's KIP-848) in one
group over 16 partitions of a three-broker cluster, each in a process of its own, while a
producer writes steadily: members join, leave, and are killed with -9. Their journals
(tests/interop/group_member.py) must show that no partition ever had two live owners, that
every acknowledged record was consumed and committed, and that no member that stayed ever
gave up a partition it kept (the coordinator moves only what must move). The pauses those
changes cause, against the classic protocol's, are bench/bench_groups.py's business."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.fixtures.zookeeper import ZooKeeperServer, server_chroot
from tests.interop.group_journal import MemberProcess, SteadyProducer, missing, ownership, settled, two_owners
from tributary.protocol.messages import ApiKey
from tributary.protocol.supported import SUPPORTED_VERSIONS
from tributary.testing.cluster import Cluster, start_cluster
from tributary.testing.polling import eventually

PARTITIONS = 16
TIMEOUT = 60.0
#: Quick heartbeats and a short session, so a killed member's partitions move within seconds.
BROKER_SETTINGS = {
    "offsets.topic.num.partitions": "3",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": "3000",
    "group.consumer.min.session.timeout.ms": "1000",
}

pytestmark = pytest.mark.skipif(
    (SUPPORTED_VERSIONS[ApiKey.METADATA].hi or 0) < 10,
    reason="librdkafka's KIP-848 consumer names topics by id: the broker must serve Metadata v10+",
)


@pytest.fixture(scope="module")
def cluster(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("kip848")
    yield from start_cluster(server_chroot(zookeeper_server, "kip848"), root, 3, BROKER_SETTINGS)


def test_members_join_leave_and_die_without_two_owners_or_losses(cluster: Cluster, tmp_path: Path) -> None:
    topic, group = "kip848-steady", "kip848-group"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(TIMEOUT)
    members: list[MemberProcess] = []

    def start(name: str) -> MemberProcess:
        member = MemberProcess(name, cluster.bootstrap, group, topic, "consumer", tmp_path)
        member.start()
        members.append(member)
        return member

    def logs() -> str:
        return "\n".join(m.log_path.read_text()[-2000:] for m in members if m.running())

    def wait_settled(what: str) -> None:
        eventually(lambda: settled(members, PARTITIONS), TIMEOUT, what, interval=0.1, detail=logs)

    try:
        with SteadyProducer(cluster.bootstrap, topic, PARTITIONS, rate=800) as producer:
            for name in ("a", "b", "c"):
                start(name)
            wait_settled("three members to share the partitions")
            start("d")
            wait_settled("a fourth member to get its share")
            members[0].close()  # a leaves: it revokes, commits and sends its leave heartbeat
            wait_settled("the others to take a's partitions")
            members[1].kill()  # kill -9: b's partitions move once its session expires
            wait_settled("the others to take b's partitions after its session expired")
            start("e")
            wait_settled("a fifth member to get its share")
        assert producer.errors == []
        produced = {p: offsets for p, offsets in producer.acked.items()}
        assert sum(len(o) for o in produced.values()) > 1000
        # Every acknowledged record reaches a member (the dead one's uncommitted ones again).
        eventually(lambda: not missing(members, produced), TIMEOUT, "every record to be consumed", interval=0.2,
                   detail=lambda: str({p: o[:5] for p, o in missing(members, produced).items()}))  # fmt: skip
        for member in members:
            if member.running():
                assert member.close() == 0, member.log_path.read_text()[-2000:]
    finally:
        for member in members:
            if member.running():
                member.kill()

    owned = ownership(members)
    assert two_owners(owned) == []
    # With KIP-848 a member gives up only what moves to another member.
    assert owned.kept_but_revoked == []
    # Everything consumed is committed: the group's offsets are the partitions' ends.
    ends = {p: max(offsets) + 1 for p, offsets in produced.items()}
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])
    result = admin.list_consumer_group_offsets([request])[group].result(TIMEOUT)
    committed = {tp.partition: tp.offset for tp in result.topic_partitions}
    assert committed == ends
    # Every member that ended cleanly said so; the killed one could not.
    closed = {m.name for m in members if any(e["ev"] == "closed" for e in m.events())}
    assert closed == {"a", "c", "d", "e"}
