"""The pure parts of broker.cluster: placement, leader election rules, znode formats, snapshot helpers."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tributary.broker.cluster import zk_paths
from tributary.broker.cluster.controller import assign_replicas, elect_leader
from tributary.broker.cluster.model import (
    NO_LEADER,
    BrokerInfo,
    ClusterSnapshot,
    PartitionState,
    ReplicaKey,
    TopicInfo,
)
from tributary.broker.cluster.znodes import (
    CreateTopicRequest,
    LeaderAndIsr,
    decode_broker,
    decode_config,
    decode_controller,
    decode_create_request,
    decode_partition_state,
    decode_producer_id_block,
    decode_topic,
    encode_broker,
    encode_config,
    encode_create_request,
    encode_partition_state,
    encode_producer_id_block,
    encode_topic,
    new_uuid,
)
from tributary.broker.security.listeners import Endpoint


@pytest.mark.parametrize(("brokers", "partitions"), [(3, 6), (3, 7), (5, 3), (1, 4)])
@pytest.mark.parametrize("start", [0, 1, 2])
def test_assignment_spreads_leaders_evenly(brokers: int, partitions: int, start: int) -> None:
    ids = [10 * (i + 1) for i in range(brokers)]
    assignment = assign_replicas(ids, partitions, 1, start)
    leaders = Counter(replicas[0] for replicas in assignment.values())
    assert sorted(assignment) == list(range(partitions))
    assert max(leaders.values()) - min(leaders.get(i, 0) for i in ids) <= 1


def test_assignment_replicas_are_distinct_brokers() -> None:
    assignment = assign_replicas([3, 1, 2], 5, 3, start=1)
    assert all(sorted(replicas) == [1, 2, 3] for replicas in assignment.values())
    with pytest.raises(ValueError, match="replication factor"):
        assign_replicas([1, 2], 1, 3, start=0)


def test_placement_follows_kafkas_example() -> None:
    # The table in Kafka's AdminUtils (5 brokers, 10 partitions, 3 replicas, start 0, shift 0).
    assignment = assign_replicas(range(5), 10, 3, start=0, shift=0)
    assert [assignment[p] for p in (0, 4, 5, 9)] == [(0, 1, 2), (4, 0, 1), (0, 2, 3), (4, 1, 2)]
    leaders = [replicas[0] for replicas in assignment.values()]
    assert sorted(leaders.count(b) for b in range(5)) == [2] * 5
    # When one broker dies, its leaderships move to several others, not all to the next one.
    successors = {replicas[1] for replicas in assignment.values() if replicas[0] == 0}
    assert len(successors) == 2


def test_placement_is_rack_aware() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    assignment = assign_replicas(racks, 12, 3, start=2, shift=1, racks=racks)
    for replicas in assignment.values():
        assert len(set(replicas)) == 3
        assert {racks[b] for b in replicas} == {"a", "b", "c"}
    assert sorted([r[0] for r in assignment.values()].count(b) for b in racks) == [2] * 6
    # Two racks, three replicas: both racks hold one, and the third goes wherever is left.
    two = {1: "a", 2: "a", 3: "b", 4: "b"}
    for replicas in assign_replicas(two, 8, 3, start=0, racks=two).values():
        assert {two[b] for b in replicas} == {"a", "b"} and len(set(replicas)) == 3


def test_a_live_leader_stays() -> None:
    assert elect_leader(LeaderAndIsr(1, 4, (1,), 1), (1,), {1, 2}, 2) is None


def test_a_sole_dead_leader_goes_offline_keeping_epoch_and_isr() -> None:
    assert elect_leader(LeaderAndIsr(1, 4, (1,), 1), (1,), {2}, 2) == LeaderAndIsr(NO_LEADER, 4, (1,), 2)
    # And stays there without further writes.
    assert elect_leader(LeaderAndIsr(NO_LEADER, 4, (1,), 2), (1,), {2}, 2) is None


def test_a_returning_replica_leads_again_with_the_next_epoch() -> None:
    assert elect_leader(LeaderAndIsr(NO_LEADER, 4, (1,), 2), (1,), {1, 2}, 3) == LeaderAndIsr(1, 5, (1,), 3)


def test_leadership_moves_within_the_isr_only() -> None:
    # Replica 3 is alive but out of sync: choosing it would lose acknowledged data.
    assert elect_leader(LeaderAndIsr(1, 0, (1, 2), 1), (1, 2, 3), {2, 3}, 1) == LeaderAndIsr(2, 1, (2,), 1)
    assert elect_leader(LeaderAndIsr(1, 0, (1,), 1), (1, 2, 3), {2, 3}, 1) == LeaderAndIsr(NO_LEADER, 0, (1,), 1)


def test_a_controlled_shutdown_hands_leadership_to_another_in_sync_replica() -> None:
    state = LeaderAndIsr(1, 3, (1, 2, 3), 1)
    # 1 is shutting down: 2 takes over in the next epoch, and 1 leaves the ISR.
    assert elect_leader(state, (1, 2, 3), {1, 2, 3}, 1, shutting_down={1}) == LeaderAndIsr(2, 4, (2, 3), 1)
    # A follower shutting down changes nothing here (its leader drops it from the ISR).
    assert elect_leader(state, (1, 2, 3), {1, 2, 3}, 1, shutting_down={3}) is None
    # With no other in-sync replica the departing leader keeps the partition until it is gone.
    assert elect_leader(LeaderAndIsr(1, 3, (1,), 1), (1, 2), {1, 2}, 1, shutting_down={1}) is None
    # A dead leader's successor is never one that is shutting down.
    assert elect_leader(state, (1, 2, 3), {2, 3}, 1, shutting_down={2}) == LeaderAndIsr(3, 4, (3,), 1)


def test_a_leader_that_restarted_unseen_is_replaced_or_re_elected_in_a_new_epoch() -> None:
    # Its registration is newer than the partition state: it died and came back between two
    # looks of the controller (or before a new controller took over).
    state = LeaderAndIsr(1, 3, (1, 2, 3), 1)
    assert elect_leader(state, (1, 2, 3), {1, 2, 3}, 1, restarted=True) == LeaderAndIsr(2, 4, (2, 3), 1)
    alone = LeaderAndIsr(1, 3, (1,), 1)
    assert elect_leader(alone, (1, 2), {1, 2}, 1, restarted=True) == LeaderAndIsr(1, 4, (1,), 1)


def test_a_replica_that_rejoined_since_the_isr_was_written_is_chosen_last_and_leaves_the_isr() -> None:
    # Leader 1 and follower 2 lost power and registered again before the controller looked; 3
    # kept running. 2 is still listed in sync, but may lack what it had not fsynced (KIP-966).
    state = LeaderAndIsr(1, 3, (1, 2, 3), 1)
    assert elect_leader(state, (1, 2, 3), {1, 2, 3}, 1, restarted=True, rejoined={1, 2}) == LeaderAndIsr(3, 4, (3,), 1)
    # The leader died for good; 2 rejoined, 3 kept running: 3 leads, 2 must catch up again.
    assert elect_leader(state, (1, 2, 3), {2, 3}, 1, rejoined={2}) == LeaderAndIsr(3, 4, (3,), 1)
    # Only rejoined replicas are left: one of them leads, the others stay in sync with it
    # (nothing better is left; under high.watermark.fsync nothing was lost either).
    assert elect_leader(state, (1, 2, 3), {2}, 1, rejoined={2}) == LeaderAndIsr(2, 4, (2,), 1)
    assert elect_leader(state, (1, 2, 3), {2, 3}, 1, rejoined={2, 3}) == LeaderAndIsr(2, 4, (2, 3), 1)


def test_broker_registration_round_trips_and_reads_kafka_endpoints() -> None:
    plaintext = Endpoint("PLAINTEXT", "PLAINTEXT", "broker7.east", 9092)
    info = BrokerInfo(7, "broker7.east", 9092, "east", endpoints=(plaintext,))
    assert decode_broker(7, encode_broker(info)) == info
    # Without endpoints (an old registration): one PLAINTEXT listener at host:port.
    assert decode_broker(7, encode_broker(BrokerInfo(7, "broker7.east", 9092, "east"))) == info
    # Several listeners, each with its protocol; host/port are the inter-broker listener's.
    internal = Endpoint("INTERNAL", "SASL_SSL", "10.0.0.7", 9093)
    external = Endpoint("EXTERNAL", "SSL", "broker7.example.com", 9094)
    two = BrokerInfo(7, "10.0.0.7", 9093, "east", endpoints=(internal, external))
    data = encode_broker(two)
    assert json.loads(data)["listener_security_protocol_map"] == {"INTERNAL": "SASL_SSL", "EXTERNAL": "SSL"}
    assert decode_broker(7, data) == two
    assert two.address("EXTERNAL") == ("broker7.example.com", 9094)
    assert two.address("REPLICATION") is None
    kafka = b'{"version":5,"host":null,"port":-1,"endpoints":["PLAINTEXT://[::1]:9093"],"rack":"r1"}'
    assert decode_broker(3, kafka) == BrokerInfo(
        3, "::1", 9093, "r1", endpoints=(Endpoint("PLAINTEXT", "PLAINTEXT", "::1", 9093),)
    )
    with pytest.raises(ValueError, match="neither host/port nor endpoints"):
        decode_broker(3, b'{"version":5}')


def test_topic_and_partition_state_round_trip() -> None:
    topic_id = new_uuid()
    assert len(topic_id) == 22
    assert decode_topic(encode_topic(topic_id, {1: [2, 3], 0: (1,)})) == (topic_id, {0: (1,), 1: (2, 3)})
    # Kafka before 2.8 wrote no topic id.
    assert decode_topic(b'{"version":1,"partitions":{"0":[1]}}') == ("", {0: (1,)})
    state = LeaderAndIsr(2, 5, (2, 3), 9)
    assert decode_partition_state(encode_partition_state(state)) == state
    assert decode_config(encode_config({"cleanup.policy": "delete"})) == {"cleanup.policy": "delete"}
    assert decode_controller(b'{"version":1,"brokerid":4,"timestamp":"1"}') == 4


def test_producer_id_block_reads_kafka_strings() -> None:
    assert decode_producer_id_block(encode_producer_id_block(1, 1000, 1999)) == (1000, 1999)
    assert decode_producer_id_block(b'{"version":1,"broker":0,"block_start":"0","block_end":"999"}') == (0, 999)


def test_create_request_round_trips() -> None:
    request = CreateTopicRequest(new_uuid(), 3, 1, {"retention.ms": "1"}, requested_by=2)
    assert decode_create_request(encode_create_request(request)) == request


@pytest.mark.parametrize("data", [b"", b"[1]", b"\xff", b'{"leader":"x","leader_epoch":0,"isr":[]}', b'{"leader":1}'])
def test_malformed_nodes_raise_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode_partition_state(data)


def test_paths_follow_kafka_layout() -> None:
    assert zk_paths.broker(1) == "/brokers/ids/1"
    assert zk_paths.partition_state("t", 3) == "/brokers/topics/t/partitions/3/state"
    assert zk_paths.topic_config("t") == "/config/topics/t"
    assert zk_paths.child_of("/brokers/topics/t/partitions/3/state", zk_paths.BROKER_TOPICS) == "t"
    assert zk_paths.child_of("/brokers/topics", zk_paths.BROKER_TOPICS) is None
    assert zk_paths.child_of("/brokers/ids/2", zk_paths.BROKER_TOPICS) is None


def test_snapshot_helpers() -> None:
    brokers = {1: BrokerInfo(1, "h1", 1), 2: BrokerInfo(2, "h2", 2)}
    topic = TopicInfo(
        "t",
        {0: PartitionState(1, 0, (1, 2), (1, 2)), 1: PartitionState(NO_LEADER, 3, (2,), (2,))},
        topic_id="id",
    )
    snapshot = ClusterSnapshot(brokers, {"t": topic}, controller_id=2, cluster_id="c", version=1)
    assert snapshot.leader_for("t", 0) == brokers[1]
    assert snapshot.leader_for("t", 1) is None
    assert snapshot.controller == brokers[2]
    assert snapshot.replicas_of(2) == {ReplicaKey("t", 0, "id"), ReplicaKey("t", 1, "id")}
    assert snapshot.replicas_of(1) == {ReplicaKey("t", 0, "id")}
    assert ClusterSnapshot.empty().controller is None
