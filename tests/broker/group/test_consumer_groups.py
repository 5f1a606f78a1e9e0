"""ConsumerGroupHeartbeat (KIP-848) against the sans-IO coordinator: joining, incremental
reconciliation with member epochs, timeouts on the fake clock, validation, persistence."""

from __future__ import annotations

import dataclasses

import pytest

from tributary.broker.group.consumer_group import ConsumerGroupState
from tributary.broker.group.consumer_records import (
    CurrentAssignmentKey,
    GroupEpochKey,
    MemberMetadataKey,
    TargetAssignmentEpochKey,
)
from tributary.broker.group.reconciliation import MemberState
from tributary.broker.group.records import decode_key
from tributary.protocol.error_codes import ErrorCode

from .consumer_harness import CONSUMER_CONFIG, REBALANCE_TIMEOUT, ConsumerHarness, Member, topic_id

T = topic_id("t")


@pytest.fixture
def h() -> ConsumerHarness:
    harness = ConsumerHarness()
    harness.set_topics({"t": 16, "u": 4})
    return harness


def owners(members: list[Member], topic: str = "t") -> dict[int, str]:
    """Partition -> the member consuming it; fails if two do."""
    seen: dict[int, str] = {}
    for m in members:
        for p in m.partitions(topic):
            assert p not in seen, f"partition {p} owned by {seen[p]} and {m.member_id}"
            seen[p] = m.member_id
    return seen


def settle(members: list[Member], rounds: int = 6) -> None:
    for _ in range(rounds):
        for m in members:
            m.heartbeat()


def test_first_member_gets_every_partition_at_once(h: ConsumerHarness) -> None:
    a = h.join_consumer()
    assert a.errors == []
    assert a.epoch == 1
    assert a.partitions() == frozenset(range(16))
    group = h.group()
    assert group.state is ConsumerGroupState.STABLE
    assert (group.group_epoch, group.assignment_epoch) == (1, 1)


def test_heartbeat_answers_the_interval_and_no_assignment_when_nothing_changed(h: ConsumerHarness) -> None:
    a = h.join_consumer()
    result = a.heartbeat()
    assert result.error == ErrorCode.NONE
    assert result.heartbeat_interval_ms == CONSUMER_CONFIG.consumer_heartbeat_interval_ms
    assert result.assignment is None
    assert result.member_epoch == 1


def test_a_second_member_gets_partitions_only_after_the_first_revoked_them(h: ConsumerHarness) -> None:
    a = h.join_consumer()
    a.lazy = True  # it revokes when the test says so
    b = h.join_consumer()
    # The target splits 8/8 at epoch 2, but a still owns everything: b gets nothing yet.
    assert b.epoch == 2
    assert b.partitions() == frozenset()
    assert h.group().members[b.member_id].state is MemberState.UNRELEASED_PARTITIONS
    # a learns what it keeps; it stays at epoch 1 until it revoked the rest.
    a.heartbeat()
    assert a.epoch == 1
    assert len(a.assignment[T]) == 8
    assert h.group().members[a.member_id].state is MemberState.UNREVOKED_PARTITIONS
    owners([a, b])
    b.heartbeat()
    assert b.partitions() == frozenset()
    # a revokes; its next heartbeat says so and moves it to epoch 2.
    a.revoke()
    a.heartbeat()
    assert a.epoch == 2
    owners([a, b])
    b.heartbeat()
    assert len(b.partitions()) == 8
    assert owners([a, b]).keys() == set(range(16))
    assert h.group().state is ConsumerGroupState.STABLE


def test_a_member_keeps_its_partitions_through_a_change(h: ConsumerHarness) -> None:
    members = [h.join_consumer() for _ in range(3)]
    settle(members)
    before = {m.member_id: m.partitions() for m in members}
    newcomer = h.join_consumer()
    settle([*members, newcomer])
    for m in members:
        # uniform is sticky: every old member keeps a subset of what it had.
        assert m.partitions() <= before[m.member_id]
        assert len(m.partitions()) == 4
    assert len(newcomer.partitions()) == 4
    assert owners([*members, newcomer]).keys() == set(range(16))


def test_epochs_never_go_backwards(h: ConsumerHarness) -> None:
    members = [h.join_consumer() for _ in range(2)]
    seen = {m.member_id: m.epoch for m in members}
    for _ in range(3):
        members.append(h.join_consumer())
        for _ in range(4):
            for m in members:
                m.heartbeat()
                assert m.epoch >= seen.get(m.member_id, 0)
                seen[m.member_id] = m.epoch
    assert h.group().state is ConsumerGroupState.STABLE


def test_leaving_hands_the_partitions_to_the_others(h: ConsumerHarness) -> None:
    a, b = h.join_consumer(), h.join_consumer()
    settle([a, b])
    result = b.leave()
    assert (result.error, result.member_epoch) == (ErrorCode.NONE, -1)
    assert b.member_id not in h.group().members
    a.heartbeat()
    assert a.partitions() == frozenset(range(16))


def test_session_timeout_fences_a_silent_member(h: ConsumerHarness) -> None:
    a, b = h.join_consumer(), h.join_consumer()
    settle([a, b])
    for _ in range(12):
        h.advance(1000)
        a.heartbeat()  # b stays silent
    assert b.member_id not in h.group().members
    assert a.partitions() == frozenset(range(16))
    assert b.heartbeat().error == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_member_that_does_not_revoke_in_time_is_fenced(h: ConsumerHarness) -> None:
    a = h.join_consumer()
    a.lazy = True
    b = h.join_consumer()
    a.heartbeat()  # told to revoke; never does
    assert h.group().members[a.member_id].state is MemberState.UNREVOKED_PARTITIONS
    for _ in range(REBALANCE_TIMEOUT // 1000 + 1):
        h.advance(1000)
        if not a.errors:
            a.heartbeat()
        b.heartbeat()
    assert a.member_id not in h.group().members
    assert a.errors == [ErrorCode.UNKNOWN_MEMBER_ID]
    b.heartbeat()
    assert b.partitions() == frozenset(range(16))


def test_a_lost_answer_lets_the_member_come_back_with_its_previous_epoch(h: ConsumerHarness) -> None:
    a = h.join_consumer()
    b = h.join_consumer()
    settle([a, b])
    group = h.group()
    # The last answer to b moved it on an epoch; b never saw it and retries with the one before.
    previous = group.members[b.member_id].assignment.previous_member_epoch
    result = h.cgh(b.member_id, previous, owned=b.owned)
    assert result.error == ErrorCode.NONE
    # An epoch that was never b's is fenced.
    assert h.cgh(b.member_id, b.epoch + 5, owned={}).error == ErrorCode.FENCED_MEMBER_EPOCH


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"member_id": ""}, ErrorCode.INVALID_REQUEST),
        ({"rebalance_timeout": -1}, ErrorCode.INVALID_REQUEST),
        ({"owned": None}, ErrorCode.INVALID_REQUEST),
        ({"topics": None}, ErrorCode.INVALID_REQUEST),
        ({"assignor": "sticky"}, ErrorCode.UNSUPPORTED_ASSIGNOR),
        ({"regex": "(unclosed", "topics": None}, ErrorCode.INVALID_REGULAR_EXPRESSION),
        ({"epoch": -3}, ErrorCode.INVALID_REQUEST),
        ({"group": ""}, ErrorCode.INVALID_REQUEST),
    ],
)
def test_invalid_joins_are_refused_and_change_nothing(h: ConsumerHarness, changes: dict, error: ErrorCode) -> None:
    request = {"member_id": "m", "epoch": 0, "topics": ("t",), "owned": {}, "rebalance_timeout": 1000}
    request.update(changes)
    member_id, epoch = request.pop("member_id"), request.pop("epoch")
    result = h.cgh(member_id, epoch, **request)
    assert result.error == error, result
    assert result.error_message
    assert "g" not in h.coordinator.consumers.groups


def test_v0_lets_the_coordinator_name_the_member(h: ConsumerHarness) -> None:
    result = h.cgh("", 0, topics=("t",), owned={}, rebalance_timeout=1000, api_version=0)
    assert result.error == ErrorCode.NONE
    assert result.member_id


def test_heartbeat_for_an_unknown_group_or_member(h: ConsumerHarness) -> None:
    assert h.cgh("m", 3, owned={}).error == ErrorCode.GROUP_ID_NOT_FOUND
    h.join_consumer()
    assert h.cgh("stranger", 3, owned={}).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_group_max_size(h: ConsumerHarness) -> None:
    small = ConsumerHarness(dataclasses.replace(CONSUMER_CONFIG, consumer_max_size=1))
    small.set_topics({"t": 2})
    small.join_consumer()
    result = small.cgh("second", 0, topics=("t",), owned={}, rebalance_timeout=1000)
    assert result.error == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_range_assignor_on_request(h: ConsumerHarness) -> None:
    result = h.cgh("a", 0, topics=("t", "u"), owned={}, rebalance_timeout=1000, assignor="range")
    assert result.error == ErrorCode.NONE
    result = h.cgh("b", 0, topics=("t", "u"), owned={}, rebalance_timeout=1000, assignor="range")
    group = h.group()
    assert group.targets["a"][T] == frozenset(range(8))
    assert group.targets["b"][T] == frozenset(range(8, 16))
    assert group.targets["a"][topic_id("u")] == frozenset({0, 1})


def test_regex_subscription_follows_new_topics(h: ConsumerHarness) -> None:
    result = h.cgh("a", 0, regex="(^o.*)", owned={}, rebalance_timeout=1000)
    assert result.error == ErrorCode.NONE
    assert result.assignment == {}
    h.set_topics({"t": 16, "u": 4, "orders": 3, "other": 1, "xorders": 2})
    result = h.cgh("a", result.member_epoch, owned={})
    assert result.assignment == {topic_id("orders"): frozenset({0, 1, 2}), topic_id("other"): frozenset({0})}
    described = h.coordinator.consumer_describe("g")
    assert described.members[0].subscribed_topic_regex == "(^o.*)"


def test_more_partitions_reach_the_members(h: ConsumerHarness) -> None:
    a = h.join_consumer()
    h.set_topics({"t": 20, "u": 4})
    a.heartbeat()
    assert a.partitions() == frozenset(range(20))


def test_static_member_leaves_and_returns_with_its_partitions(h: ConsumerHarness) -> None:
    a = h.join_consumer("a1", instance="instance-a")
    b = h.join_consumer()
    settle([a, b])
    kept = a.partitions()
    epoch = h.group().group_epoch
    away = h.cgh("a1", -2, instance="instance-a")
    assert (away.error, away.member_epoch) == (ErrorCode.NONE, -2)
    # Its partitions stay with it: nobody else gets them, and the group epoch holds.
    b.heartbeat()
    assert b.partitions().isdisjoint(kept)
    assert h.group().group_epoch == epoch
    # Another instance id cannot take it over while it is away... but a restart with the
    # same instance id and a new member id takes its place, partitions included.
    back = Member("a2", ("t",), h, instance="instance-a")
    result = back.join()
    assert result.error == ErrorCode.NONE
    assert back.partitions() == kept
    assert "a1" not in h.group().members
    assert h.cgh("a1", 3, owned={}, instance="instance-a").error == ErrorCode.FENCED_INSTANCE_ID


def test_static_instance_id_in_use_is_unreleased(h: ConsumerHarness) -> None:
    h.join_consumer("a1", instance="i")
    result = h.cgh("a2", 0, topics=("t",), owned={}, rebalance_timeout=1000, instance="i")
    assert result.error == ErrorCode.UNRELEASED_INSTANCE_ID


def test_the_group_is_rebuilt_from_its_records(h: ConsumerHarness) -> None:
    members = [h.join_consumer() for _ in range(3)]
    settle(members)
    members[1].lazy = True
    members.append(h.join_consumer())
    for m in members:
        m.heartbeat()
    live = h.group()
    partition = live.partition
    # What was written, read back by a coordinator taking over the partition.
    kinds = {type(decode_key(k)) for k, _ in h.log[partition]}
    assert {GroupEpochKey, MemberMetadataKey, TargetAssignmentEpochKey, CurrentAssignmentKey} <= kinds
    fresh = ConsumerHarness()
    fresh.log = h.log
    fresh.load(partition)
    loaded = fresh.group()
    assert loaded.members == live.members
    assert loaded.targets == live.targets
    assert (loaded.group_epoch, loaded.assignment_epoch) == (live.group_epoch, live.assignment_epoch)
    assert loaded.partition_epochs == live.partition_epochs
    assert loaded.state == live.state


def test_a_failed_write_leaves_the_group_as_it_was(h: ConsumerHarness) -> None:
    a = h.join_consumer()
    before = h.group().snapshot()
    h.write_error = ErrorCode.NOT_LEADER_OR_FOLLOWER
    result = h.cgh("b", 0, topics=("t",), owned={}, rebalance_timeout=1000)
    assert result.error == ErrorCode.NOT_COORDINATOR
    group = h.group()
    assert group.members == before.members
    assert group.group_epoch == before.group_epoch
    assert group.targets == before.targets
    h.write_error = None
    assert a.heartbeat().error == ErrorCode.NONE


def test_commits_check_the_member_epoch(h: ConsumerHarness) -> None:
    a = h.join_consumer()
    ok = h.commit({("t", 0): 5}, member_id=a.member_id, generation=a.epoch)
    assert h.commit_errors(ok) == {("t", 0): ErrorCode.NONE}
    stale = h.commit({("t", 0): 6}, member_id=a.member_id, generation=a.epoch - 1)
    assert h.commit_errors(stale) == {("t", 0): ErrorCode.STALE_MEMBER_EPOCH}
    stranger = h.commit({("t", 0): 7}, member_id="x", generation=1)
    assert h.commit_errors(stranger) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    assert h.committed(("t", 0)) == 5
    a.leave()
    # An empty consumer group takes commits from tools (generation -1).
    admin = h.commit({("t", 0): 9})
    assert h.commit_errors(admin) == {("t", 0): ErrorCode.NONE}


def test_describe_and_list(h: ConsumerHarness) -> None:
    a = h.join_consumer()
    summary = h.coordinator.consumer_describe("g")
    assert summary.error == ErrorCode.NONE
    assert (summary.state, summary.group_epoch, summary.assignment_epoch) == ("Stable", 1, 1)
    assert summary.assignor == "uniform"
    (member,) = summary.members
    assert member.member_id == a.member_id
    assert member.assignment == ((T, "t", tuple(range(16))),)
    assert member.target_assignment == member.assignment
    _, groups = h.coordinator.list_groups()
    assert [(g.group_id, g.group_type, g.state, g.protocol_type) for g in groups] == [
        ("g", "consumer", "Stable", "consumer")
    ]
    assert h.coordinator.list_groups(types=["classic"])[1] == []
    assert [g.group_id for g in h.coordinator.list_groups(types=["CONSUMER"], states=["stable"])[1]] == ["g"]
    # DescribeGroups (classic) sees it as Dead, flagged so the handler can say GROUP_ID_NOT_FOUND at v6+.
    classic_view = h.coordinator.describe("g")
    assert (classic_view.state, classic_view.consumer_group) == ("Dead", True)
    assert h.coordinator.consumer_describe("nope").error == ErrorCode.GROUP_ID_NOT_FOUND


def test_delete_an_empty_consumer_group_with_its_offsets(h: ConsumerHarness) -> None:
    a = h.join_consumer()
    h.commit({("t", 1): 3}, member_id=a.member_id, generation=a.epoch)
    results, effects = h.coordinator.delete_groups(h.now, ["g"])
    assert results == {"g": ErrorCode.NON_EMPTY_GROUP}
    a.leave()
    results, effects = h.coordinator.delete_groups(h.now, ["g"])
    h.apply(effects)
    assert results == {"g": ErrorCode.NONE}
    fresh = ConsumerHarness()
    fresh.log = h.log
    fresh.load(h.coordinator.partition_for("g"))
    assert "g" not in fresh.coordinator.consumers.groups
    assert fresh.committed(("t", 1)) is None
