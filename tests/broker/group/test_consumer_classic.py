"""Classic and consumer members in one group (Kafka 4.0's online migration): a classic group
upgraded by a ConsumerGroupHeartbeat, JoinGroup members served from the consumer group's
assignment, and the downgrade when the last consumer-protocol member leaves."""

from __future__ import annotations

import dataclasses

import pytest

from tributary.broker.group.consumer_classic import parse_assignment
from tributary.broker.group.group import GroupState
from tributary.broker.group.records import GroupKey, decode_key
from tributary.protocol import codec
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from .consumer_harness import CONSUMER_CONFIG, ConsumerHarness, topic_id

SESSION = 10_000
REBALANCE = 30_000


def subscription(topics: list[str], owned: dict[str, list[int]] | None = None) -> bytes:
    body = ConsumerProtocolSubscription(
        topics=topics,
        owned_partitions=[ConsumerProtocolSubscription.TopicPartition(t, ps) for t, ps in (owned or {}).items()],
    )
    return b"\x00\x01" + codec.encode(body, 1)


def assignment(partitions: dict[str, list[int]]) -> bytes:
    body = ConsumerProtocolAssignment(
        assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(t, ps) for t, ps in partitions.items()]
    )
    return b"\x00\x01" + codec.encode(body, 1)


def protocols(owned: dict[str, list[int]] | None = None) -> tuple[tuple[str, bytes], ...]:
    return (("range", subscription(["t"], owned)),)


@pytest.fixture
def h() -> ConsumerHarness:
    harness = ConsumerHarness()
    harness.set_topics({"t": 12})
    return harness


def classic_group(h: ConsumerHarness) -> tuple[str, str, int]:
    """Two classic members, t-0..5 and t-6..11, Stable."""
    a, b = h.new_member(protocols=protocols()), h.new_member(protocols=protocols())
    ta, tb = h.join(a, protocols=protocols()), h.join(b, protocols=protocols())
    h.advance(2 * CONSUMER_CONFIG.initial_rebalance_delay_ms)
    generation = h.join_result(ta).generation_id
    leader = h.join_result(ta).leader
    plan = {a: assignment({"t": list(range(6))}), b: assignment({"t": list(range(6, 12))})}
    syncs = [h.sync(m, generation, plan if m == leader else None) for m in (a, b)]
    assert [h.sync_result(t).error for t in syncs] == [ErrorCode.NONE, ErrorCode.NONE]
    assert h.join_result(tb).error == ErrorCode.NONE
    return a, b, generation


def rejoin_classic(
    h: ConsumerHarness, member_id: str, owned: dict[str, list[int]] | None = None
) -> dict[str, frozenset[int]]:
    """What a classic member does when told to: JoinGroup (at once answered), then SyncGroup."""
    joined = h.join_result(h.join(member_id, protocols=protocols(owned)))
    assert joined.error == ErrorCode.NONE, joined
    assert joined.leader == ""  # nobody leads: the coordinator assigns
    synced = h.sync_result(h.sync(member_id, joined.generation_id))
    assert synced.error == ErrorCode.NONE, synced
    assert synced.protocol_name == "range"
    return parse_assignment(synced.assignment)


def test_an_empty_classic_group_becomes_a_consumer_group_with_its_offsets(h: ConsumerHarness) -> None:
    h.commit({("t", 3): 42})  # a tool committed for group g: an Empty classic group
    assert "g" in h.coordinator.groups
    member = h.join_consumer()
    assert member.errors == []
    assert "g" not in h.coordinator.groups
    assert h.committed(("t", 3)) == 42
    assert h.coordinator.list_groups()[1][0].group_type == "consumer"


def test_a_consumer_member_upgrades_a_classic_group(h: ConsumerHarness) -> None:
    a, b, generation = classic_group(h)
    c = h.join_consumer("c")
    assert c.errors == []
    assert "g" not in h.coordinator.groups
    group = h.group()
    # The classic members are members of the consumer group, at the generation as their epoch.
    assert group.members[a].uses_classic and group.members[a].epoch == generation
    assert group.members[a].assignment.assigned == {topic_id("t"): frozenset(range(6))}
    # The group moved on: c gets nothing owned by another yet; the classic members are told to rejoin.
    assert c.partitions() == frozenset()
    assert h.heartbeat(a, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    assert h.heartbeat(b, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    # Eager classic consumers give everything up and join owning nothing.
    kept_a = rejoin_classic(h, a)
    kept_b = rejoin_classic(h, b)
    c.heartbeat()
    got = {"a": kept_a.get("t", frozenset()), "b": kept_b.get("t", frozenset()), "c": c.partitions()}
    assert sum(len(ps) for ps in got.values()) == 12
    assert set().union(*got.values()) == set(range(12))
    assert sorted(len(ps) for ps in got.values()) == [4, 4, 4]
    # The upgrade is in the log: the classic group's tombstone, then the consumer group's records.
    keys = [decode_key(k) for k, _ in h.log[group.partition]]
    tombstone = next(
        i for i, (k, v) in enumerate(h.log[group.partition]) if isinstance(keys[i], GroupKey) and v is None
    )
    assert all(not isinstance(k, GroupKey) for k in keys[tombstone + 1 :])


def test_a_classic_member_that_keeps_its_partitions_acknowledges_by_rejoining(h: ConsumerHarness) -> None:
    a, _, _ = classic_group(h)
    c = h.join_consumer("c")
    # A cooperative classic member rejoins still owning its partitions: it keeps what the target
    # leaves it and is told (through SyncGroup) what it still may own; c waits for the rest.
    kept = rejoin_classic(h, a, {"t": list(range(6))})
    assert kept["t"] < frozenset(range(6))
    assert h.group().members[a].state.name == "UNREVOKED_PARTITIONS"
    assert h.heartbeat(a, h.group().members[a].epoch) == ErrorCode.REBALANCE_IN_PROGRESS
    c.heartbeat()
    assert c.partitions().isdisjoint(range(6))
    # Having revoked, it joins again owning only what it kept.
    rejoin_classic(h, a, {"t": sorted(kept["t"])})
    c.heartbeat()
    assert c.partitions() & frozenset(range(6))


def test_classic_requests_from_the_wrong_generation_or_a_consumer_member(h: ConsumerHarness) -> None:
    a, _b, generation = classic_group(h)
    c = h.join_consumer("c")
    assert h.heartbeat(a, generation + 7) == ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat(c.member_id, c.epoch) == ErrorCode.UNKNOWN_MEMBER_ID  # it heartbeats its own way
    assert h.sync_result(h.sync(a, generation + 7)).error == ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat("nobody", generation) == ErrorCode.UNKNOWN_MEMBER_ID
    commit = h.commit({("t", 0): 1}, member_id=a, generation=generation + 7)
    assert h.commit_errors(commit) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}


def test_the_last_consumer_member_leaving_downgrades_the_group(h: ConsumerHarness) -> None:
    a, b, _ = classic_group(h)
    c = h.join_consumer("c")
    rejoin_classic(h, a)
    rejoin_classic(h, b)
    c.heartbeat()
    h.commit({("t", 1): 7}, member_id=c.member_id, generation=c.epoch)
    assert c.leave().error == ErrorCode.NONE
    assert "g" not in h.coordinator.consumers.groups
    group = h.coordinator.groups["g"]
    assert set(group.members) == {a, b}
    assert group.state is GroupState.PREPARING_REBALANCE
    assert h.committed(("t", 1)) == 7
    # A fresh coordinator reads the classic group back (the downgrade wrote its metadata).
    fresh = ConsumerHarness()
    fresh.log = h.log
    fresh.load(group.partition)
    assert set(fresh.coordinator.groups["g"].members) == {a, b}
    assert "g" not in fresh.coordinator.consumers.groups


def test_no_upgrade_when_the_policy_forbids_it(h: ConsumerHarness) -> None:
    strict = ConsumerHarness(dataclasses.replace(CONSUMER_CONFIG, consumer_migration_policy="downgrade"))
    strict.set_topics({"t": 12})
    classic_group(strict)
    result = strict.cgh("c", 0, topics=("t",), owned={}, rebalance_timeout=REBALANCE)
    assert result.error == ErrorCode.GROUP_ID_NOT_FOUND
    assert "g" in strict.coordinator.groups


def test_an_empty_consumer_group_becomes_classic_on_join_group(h: ConsumerHarness) -> None:
    member = h.join_consumer()
    h.commit({("t", 2): 5}, member_id=member.member_id, generation=member.epoch)
    member.leave()
    assert "g" in h.coordinator.consumers.groups  # Empty, with offsets
    a = h.new_member(protocols=protocols())
    assert "g" in h.coordinator.groups and "g" not in h.coordinator.consumers.groups
    assert h.committed(("t", 2)) == 5
    assert a


def test_classic_member_silent_past_its_session_is_fenced(h: ConsumerHarness) -> None:
    a, b, _ = classic_group(h)
    c = h.join_consumer("c")
    for _ in range(SESSION // 1000 + 2):
        h.advance(1000)
        c.heartbeat()
    # c kept its session by heartbeating; the classic members sent nothing.
    assert set(h.group().members) == {"c"}
    assert h.heartbeat(a, 2) == ErrorCode.UNKNOWN_MEMBER_ID
    assert b
