"""Topic ids: a topic written without one (Kafka before 2.8, a foreign tool) gets one from the
controller, and is the same topic to every broker afterwards: no log is dropped for it."""

from __future__ import annotations

import json

import trio
from kazoo.client import KazooClient

from tests.broker.cluster.conftest import Brokers
from tributary.broker.cluster import ReplicaKey
from tributary.broker.cluster.model import AssignmentChange, TopicInfo, same_topic, topic_id_text, topic_uuid
from tributary.broker.cluster.znodes import decode_topic, encode_controller, new_uuid
from tributary.protocol.primitives import NULL_UUID


def _kafka_2_topic(zk: KazooClient, name: str, leader: int) -> None:
    """A topic as Kafka 2.x's tools wrote it: no topic_id in the topic node."""
    zk.create(f"/brokers/topics/{name}", json.dumps({"version": 2, "partitions": {"0": [leader]}}).encode(),
              makepath=True)  # fmt: skip
    state = {"controller_epoch": 1, "leader": leader, "version": 1, "leader_epoch": 0, "isr": [leader]}
    zk.create(f"/brokers/topics/{name}/partitions/0/state", json.dumps(state).encode(), makepath=True)


async def test_the_controller_gives_a_topic_an_id_and_the_broker_keeps_its_replica(brokers: Brokers) -> None:
    zk = KazooClient(hosts=brokers.zookeeper.hosts, timeout=5.0)
    zk.start()
    try:
        # A controller that does nothing holds the seat, so the topic stays without an id at first.
        zk.create("/controller", encode_controller(99), ephemeral=True, makepath=True)
        registry = await brokers.start(1)
        await registry.wait_for(lambda s: 1 in s.brokers)
        changes: list[AssignmentChange] = []
        legacy_held = trio.Event()

        async def follow() -> None:
            async for change in registry.assignment_changes():
                changes.append(change)
                if ReplicaKey("legacy", 0, "") in change.added:
                    legacy_held.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow)
            await trio.to_thread.run_sync(_kafka_2_topic, zk, "legacy", 1)
            without = await registry.wait_for(lambda s: "legacy" in s.topics)
            assert without.topics["legacy"].topic_id == ""
            assert without.topics["legacy"].uuid == NULL_UUID
            # (Not registry.wait_for: it looks again only when the cluster changes, and the feed
            # may hand this change over after the last of those.)
            with trio.fail_after(10):
                await legacy_held.wait()

            zk.delete("/controller")  # broker 1 is elected and gives the topic its id
            given = await registry.wait_for(lambda s: s.topics.get("legacy", TopicInfo("", {})).topic_id != "")
            await trio.sleep(0.2)  # any change the id would cause has been published by now
            nursery.cancel_scope.cancel()
        topic_id = given.topics["legacy"].topic_id
        stored, _ = decode_topic(zk.get("/brokers/topics/legacy")[0])
        assert stored == topic_id
        assert topic_uuid(topic_id) != NULL_UUID and topic_id_text(topic_uuid(topic_id)) == topic_id
        assert not any(r.topic == "legacy" for c in changes for r in c.removed), changes
        assert given.topic_by_uuid(topic_uuid(topic_id)) == given.topics["legacy"]
    finally:
        zk.stop()
        zk.close()


def test_a_topic_is_the_same_topic_unless_its_id_changed() -> None:
    one, other = new_uuid(), new_uuid()
    assert same_topic(TopicInfo("t", {}, topic_id=one), TopicInfo("t", {}, topic_id=one))
    assert same_topic(TopicInfo("t", {}, topic_id=""), TopicInfo("t", {}, topic_id=one))  # given an id
    assert not same_topic(TopicInfo("t", {}, topic_id=one), TopicInfo("t", {}, topic_id=other))  # recreated
    assert not same_topic(TopicInfo("t", {}, topic_id=one), None)  # deleted
    assert topic_uuid("not base64 at all!") == NULL_UUID
    assert topic_uuid("") == NULL_UUID
